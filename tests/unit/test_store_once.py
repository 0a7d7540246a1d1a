"""Each tool result is stored once: the outbox row references the archive row (issue 8)."""

import json
import sqlite3
import time

import pytest

import tencentdb_offload as plugin
from fakes.gateway import INGEST, FakeGateway
from tencentdb_offload.archive.outbox import Outbox
from tencentdb_offload.archive.store import Store
from tencentdb_offload.hooks import HookHandlers

from helpers import env_for


@pytest.fixture
def gw():
    with FakeGateway(api_key="k1") as g:
        yield g


def _runtime(tmp_path, gw):
    return plugin.build_runtime(env=env_for(tmp_path, gateway_url=gw.url, api_key="k1"))


def _refused(rt, session="s1"):
    """The sender's refused attempt, recorded (flush gives up on the outage it saw): one
    still in flight when the Gateway comes back could reopen the breaker after
    ``record_success()`` and fail the next flush (2 of 5 runs of the parallel unit suite)."""
    assert not rt.flush(session, 30)


def _back(rt, gw):
    gw.clear_fault()
    rt.client.breaker.record_success()


def _results(n, size):
    ascii_text = ("def handler(event):\n    return event['body']  # ok\n" * (size // 48 + 1))[:size]
    cjk = ("数据库连接失败，正在重试。" * (size // 39 + 1))[: size // 3]
    return [ascii_text if i % 2 else cjk for i in range(n)]


def _checkpoint(store):
    store._conn().execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return store.stats().db_bytes


def test_a_waiting_backlog_costs_the_results_once_on_disk(tmp_path, gw):
    gw.set_fault("refuse")
    rt = _runtime(tmp_path, gw)
    hooks = HookHandlers(rt)
    texts = _results(100, 100_000)
    for i, text in enumerate(texts):
        hooks.post_tool_call(tool_name="read_file", args={"path": "/f%d" % i}, result=text,
                             session_id="s1", tool_call_id="c%d" % i)
    assert rt.writer.flush(30)
    data = sum(len(t.encode("utf-8")) for t in texts)
    try:
        assert rt.store.outbox.backlog("s1") == 100
        waiting = _checkpoint(rt.store)
        assert waiting <= 1.2 * data, "store is %.2fx the data while the backlog waits" % (waiting / data)
        payloads = [r[0] for r in rt.store._conn().execute("SELECT payload FROM outbox")]
        assert all("result" not in json.loads(p) for p in payloads)
        _refused(rt)
        _back(rt, gw)
        assert rt.flush("s1", 30)
        sent = gw.ingested_pairs("hermes-s1")
        assert [p["result"] for p in sent] == texts          # the Gateway got the full text
        assert [p["tool_call_id"] for p in sent] == ["c%d" % i for i in range(100)]
        delivered = _checkpoint(rt.store)
        assert delivered <= 1.1 * data, "store is %.2fx the data once delivered" % (delivered / data)
    finally:
        rt.close()


def test_one_encode_of_the_result_on_its_way_out(tmp_path, gw):
    """The result is read from the archive as text and encoded only in the request body."""
    rt = _runtime(tmp_path, gw)
    gw.set_fault("refuse")
    HookHandlers(rt).post_tool_call(tool_name="t", args={}, result={"rows": [1, 2]},
                                    session_id="s1", tool_call_id="c1")
    rt.writer.flush(10)
    heads = rt.store.outbox.heads("s1")
    row = rt.store.outbox.load(heads)[0]
    assert row.payload["result"] == '{"rows": [1, 2]}' and row.cut == 0
    assert heads[0].bytes >= len(row.payload["result"])
    rt.close()


def test_old_outbox_rows_are_migrated_and_still_delivered(tmp_path, gw):
    """A store made before the reference column: its inline rows are delivered as they were."""
    directory = tmp_path / "home" / "tencentdb-offload"
    directory.mkdir(parents=True)
    conn = sqlite3.connect(str(directory / "store.db"))
    conn.executescript("""
        CREATE TABLE outbox(id INTEGER PRIMARY KEY, session TEXT NOT NULL, kind TEXT NOT NULL,
          payload TEXT NOT NULL, created REAL NOT NULL, attempts INTEGER NOT NULL DEFAULT 0,
          dead INTEGER NOT NULL DEFAULT 0, last_error TEXT);
        CREATE INDEX outbox_pending ON outbox(dead, session, id);""")
    old_pair = {"tool_name": "grep", "tool_call_id": "old1", "params": {"q": "x"},
                "result": "legacy inline result 旧", "timestamp": "2026-01-01T00:00:00.000Z"}
    conn.execute("INSERT INTO outbox(session,kind,payload,created) VALUES (?,?,?,?)",
                 ("s1", "pair", json.dumps(old_pair, ensure_ascii=False), time.time()))
    conn.commit()
    conn.close()
    rt = _runtime(tmp_path, gw)
    try:
        rt.worker.wake()
        assert rt.flush("s1", 10)
        assert [p["result"] for p in gw.ingested_pairs("hermes-s1")] == [old_pair["result"]]
    finally:
        rt.close()
    cols = {r[1] for r in sqlite3.connect(str(directory / "store.db")).execute(
        "PRAGMA table_info(outbox)")}
    assert {"archive_id", "bytes"} <= cols


def test_lone_surrogates_are_stored_and_sent_not_rejected(tmp_path, gw):
    rt = _runtime(tmp_path, gw)
    text = "bad decode \udc80\ud800 tail"
    HookHandlers(rt).post_tool_call(tool_name="t", args={"p": "\udcff"}, result=text,
                                    session_id="s1", tool_call_id="c1")
    try:
        assert rt.flush("s1", 10)
        assert rt.writer.stats()["lost"] == 0
        stored = rt.store.read_page("s1", "c1", 0, 10_000)["content"]
        assert stored.startswith("bad decode ") and stored.endswith(" tail") and "\ufffd" in stored
        assert gw.ingested_pairs("hermes-s1")[0]["result"] == stored
        assert any(r.path == INGEST for r in gw.requests)
    finally:
        rt.close()


def test_a_result_deleted_by_retention_before_delivery_is_not_sent_empty(tmp_path, gw):
    gw.set_fault("refuse")
    rt = _runtime(tmp_path, gw)
    HookHandlers(rt).post_tool_call(tool_name="t", args={}, result="r" * 100, session_id="s1",
                                    tool_call_id="c1")
    _refused(rt)
    rt.store.transaction([lambda c: c.execute("DELETE FROM archive")])
    _back(rt, gw)
    try:
        assert rt.flush("s1", 10)
        assert gw.ingested_pairs("hermes-s1") == []
        assert rt.store.stats().outbox_dead == 1
    finally:
        rt.close()


def test_store_once_keeps_a_different_text_inline(tmp_path):
    """Same call id archived earlier with other text: the outbox keeps its own copy."""
    st = Store(tmp_path)
    from tencentdb_offload.archive.store import ArchiveItem
    now = time.time()
    st.transaction([Store.op_archive("s", [ArchiveItem("tool_result", "first", "c1")], now),
                    Outbox.op_enqueue("s", "pair", {"tool_call_id": "c1", "result": "second"}, now)])
    row = st.outbox.load(st.outbox.heads("s"))[0]
    assert row.payload["result"] == "second"


def test_each_lone_surrogate_is_one_replacement_character(tmp_path, gw):
    # a file read with surrogateescape: each undecodable byte is one '\udcXX'; it was stored
    # and sent as three U+FFFD (its CESU-8 bytes replaced one by one), a 100 KB binary-ish
    # result as up to 300K characters, and the archive's count said so
    rt = _runtime(tmp_path, gw)
    text = "head " + "\udc80\udcff" * 50 + " tail"
    HookHandlers(rt).post_tool_call(tool_name="t", args={}, result=text, session_id="s1",
                                    tool_call_id="c1")
    try:
        assert rt.flush("s1", 10)
        page = rt.store.read_page("s1", "c1", 0, 10_000)
        assert page["content"] == "head " + "\ufffd" * 100 + " tail"
        assert page["total_chars"] == len(text)
        assert gw.ingested_pairs("hermes-s1")[0]["result"] == page["content"]
    finally:
        rt.close()
