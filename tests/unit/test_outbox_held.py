"""Rows queued while no Gateway was configured do not go to a Gateway configured later unless
the user says so. Local-only mode (the default URL, nothing answering) showed "16 waiting";
once a Gateway was configured, those rows of earlier sessions were sent to it, unasked. Now
that process holds them, doctor and status name the count and what will happen, and one
command decides: ``outbox send-held`` or ``outbox drop-held``."""

from __future__ import annotations

import json
import sqlite3

import pytest

import tencentdb_offload as plugin
from fakes.gateway import FakeGateway
from tencentdb_offload.archive.store import Store
from tencentdb_offload.hooks import HookHandlers

from helpers import env_for, run_cli, wait_for


def _queue_without_a_gateway(tmp_path, calls=3, session="s1"):
    """A process with no Gateway configured (the default URL) archives ``calls`` tool results
    and queues them, in case a Gateway answers there."""
    env = env_for(tmp_path)
    env.pop("TENCENTDB_OFFLOAD_GATEWAY_URL")           # not configured: the default URL
    rt = plugin.build_runtime(env=env)
    assert not rt.settings.gateway_configured and rt.client is not None
    hooks = HookHandlers(rt)
    for i in range(calls):
        hooks.post_tool_call(tool_name="cat", args={"i": i}, result="local secret %d" % i,
                             session_id=session, tool_call_id="old%d" % i)
    assert rt.writer.flush(30)
    rt.close()
    return rt.store.directory if rt.store else None


def _rows(store_dir):
    conn = sqlite3.connect(str(store_dir / "store.db"))
    try:
        return conn.execute("SELECT session, unconfigured FROM outbox WHERE dead=0 ORDER BY id").fetchall()
    finally:
        conn.close()


def _cli(tmp_path, *args, gw=None):
    env = {"HERMES_HOME": str(tmp_path / "home")}
    if gw is not None:
        env["TENCENTDB_OFFLOAD_GATEWAY_URL"] = gw.url
    return run_cli(list(args), env=env, cwd=tmp_path)


def test_a_gateway_configured_later_gets_them_only_when_sent(tmp_path):
    store_dir = _queue_without_a_gateway(tmp_path)
    assert [u for _s, u in _rows(store_dir)] == [1, 1, 1]       # marked as queued so
    with FakeGateway() as gw:
        rt = plugin.build_runtime(env=env_for(tmp_path, gateway_url=gw.url))
        try:
            hooks = HookHandlers(rt)
            hooks.post_tool_call(tool_name="cat", args={}, result="new work", session_id="s1",
                                 tool_call_id="new0")
            assert rt.writer.flush(30) and rt.flush("s1", 30)     # held rows are not waited for
            assert [p["tool_call_id"] for p in gw.ingested_pairs("hermes-s1")] == ["new0"]
            assert [u for _s, u in _rows(store_dir)] == [1, 1, 1]   # held, still queued

            listed = _cli(tmp_path, "outbox", "held", gw=gw)
            assert listed.returncode == 0 and "s1: 3 rows" in listed.stdout, listed.stdout
            assert "outbox send-held" in listed.stdout and "outbox drop-held" in listed.stdout
            sent = _cli(tmp_path, "outbox", "--json", "send-held", gw=gw)
            assert sent.returncode == 0 and json.loads(sent.stdout) == {"sent": 3}, sent.stderr
            rt.worker.kick("s1")
            assert wait_for(lambda: len(gw.ingested_pairs("hermes-s1")) == 4, timeout=30)
            assert {p["tool_call_id"] for p in gw.ingested_pairs("hermes-s1")} == \
                {"new0", "old0", "old1", "old2"}
        finally:
            rt.close()


def test_dropped_rows_never_leave_and_stay_in_the_archive(tmp_path):
    store_dir = _queue_without_a_gateway(tmp_path, calls=2)
    dropped = _cli(tmp_path, "outbox", "--json", "drop-held")
    assert dropped.returncode == 0 and json.loads(dropped.stdout) == {"dropped": 2}, dropped.stderr
    assert _rows(store_dir) == []
    with FakeGateway() as gw:
        rt = plugin.build_runtime(env=env_for(tmp_path, gateway_url=gw.url))
        try:
            assert rt.flush(None, 10)
            assert gw.ingested_pairs("hermes-s1") == []
        finally:
            rt.close()
    found = _cli(tmp_path, "archive", "--json", "search", "local secret")
    assert len(json.loads(found.stdout)) == 2          # recall keeps them


def test_doctor_and_status_name_the_count_and_what_will_happen(tmp_path):
    _queue_without_a_gateway(tmp_path, calls=2, session="s1")
    _queue_without_a_gateway(tmp_path, calls=1, session="s2")
    with FakeGateway() as gw:
        doc = _cli(tmp_path, "doctor", "--json", "--timeout", "2", gw=gw)
        rows = [c for c in json.loads(doc.stdout)["checks"] if c["name"] == "outbox"]
        held = next(r for r in rows if "queued while no Gateway was configured" in r["message"])
        assert held["status"] == "warn" and held["message"].startswith("3 rows queued while no Gateway "
                                                                       "was configured (from 2 sessions")
        assert "held, not sent to the Gateway at %s" % gw.url in held["message"]
        assert "outbox send-held" in held["fix"] and "outbox drop-held" in held["fix"]
        status = _cli(tmp_path, "status", gw=gw)
        assert "warning: 3 rows queued while no Gateway was configured" in status.stdout, status.stdout
    # still without a Gateway: what a Gateway configured later will and will not get, said first
    local = _cli(tmp_path, "doctor", "--json", "--timeout", "0.5")
    row = next(c for c in json.loads(local.stdout)["checks"]
               if c["name"] == "outbox" and "queued while no Gateway" in c["message"])
    assert row["status"] == "pass" and "a Gateway you configure later gets them only if you send them" \
        in row["message"]


@pytest.mark.parametrize("unconfigured", [True, False])
def test_rows_an_older_version_queued_take_the_opening_processs_mode(tmp_path, unconfigured):
    store_dir = tmp_path / "store"
    Store(store_dir).close()
    conn = sqlite3.connect(str(store_dir / "store.db"))
    with conn:          # the outbox as the previous version made it: no unconfigured column
        conn.execute("ALTER TABLE outbox RENAME TO outbox_new")
        conn.execute("CREATE TABLE outbox(id INTEGER PRIMARY KEY, session TEXT NOT NULL, kind TEXT "
                     "NOT NULL, payload TEXT NOT NULL, created REAL NOT NULL, attempts INTEGER NOT "
                     "NULL DEFAULT 0, dead INTEGER NOT NULL DEFAULT 0, last_error TEXT, archive_id "
                     "INTEGER, bytes INTEGER)")
        conn.execute("DROP TABLE outbox_new")
        conn.execute("INSERT INTO outbox(session, kind, payload, created) VALUES ('s', 'pair', '{}', 1)")
    conn.close()
    Store(store_dir, unconfigured=unconfigured).close()
    assert _rows(store_dir) == [("s", 1 if unconfigured else 0)]
