"""The command line with a throw-away HERMES_HOME, in the test's process (``ops.main``), and
once per command as users run it: ``python3 <repo root> <command>`` in a subprocess. No Hermes
needed (the demo/replay driver stands in for it)."""

from __future__ import annotations

import json
import os
import re
import socket
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

import helpers
from helpers import conversation

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # for ``tests.fakes``; appended so plugin modules never shadow
    sys.path.append(str(ROOT))

from tests.fakes.gateway import FakeGateway  # noqa: E402


def run_cli(*args: str, home: Path, env: dict = None):
    """The command in this process (helpers.run_cli), HERMES_HOME ``home``, run beside it."""
    return helpers.run_cli(args, env=dict(env or {}, HERMES_HOME=str(home)), cwd=home.parent)


def run_cli_process(*args: str, home: Path, env: dict = None, timeout: float = 90):
    """``python3 <plugin dir> ARGS`` in a new Python, exactly as a user runs it."""
    e = {k: v for k, v in os.environ.items() if not k.startswith(("TENCENTDB_OFFLOAD_", "HERMES_"))}
    e.update(HERMES_HOME=str(home), PYTHONDONTWRITEBYTECODE="1", PYTHONIOENCODING="utf-8")
    e.update(env or {})
    return subprocess.run([sys.executable, str(ROOT)] + list(args), capture_output=True,
                          text=True, env=e, timeout=timeout, cwd=str(home.parent))


def report_of(proc) -> dict:
    assert proc.returncode == 0, proc.stderr + proc.stdout[-2000:]
    return json.loads(proc.stdout)


def one_line_error(proc, *needles: str) -> str:
    assert proc.returncode != 0, proc.stdout
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    for n in needles:
        assert n in lines[0], lines[0]
    return lines[0]


def unused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def store_rows(store_dir: Path, sql: str, *params):
    conn = sqlite3.connect(str(Path(store_dir) / "store.db"))
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


@pytest.fixture
def home(tmp_path):
    h = tmp_path / "home"
    h.mkdir()
    return h


LOCAL = {"TENCENTDB_OFFLOAD_GATEWAY_URL": "off"}


# --- as a user runs it ------------------------------------------------------------------------
# The other tests run the command in this process (helpers.run_cli); this one starts
# ``python3 <plugin dir> COMMAND`` in a new Python once per command, as a user does (doctor's
# own is in test_cli_doctor, the README's in test_cli_readme).

def test_every_command_runs_as_python3_on_the_plugin_dir(home, tmp_path):
    path = tmp_path / "conv.json"
    path.write_text(json.dumps(conversation(3, 200)), encoding="utf-8")
    store = ["--store", "kept"]
    for args, said in ((["demo", "--turns", "2"] + store, "demo"),
                       (["replay", str(path), "--context-length", "64000"], "replay"),
                       (["status"] + store, "demo-"),
                       (["archive", "list"] + store, "demo-"),
                       (["outbox", "refused"] + store, ""),
                       (["report", "--out", "page.html"] + store, "page.html")):
        proc = run_cli_process(*args, home=home, env=LOCAL)
        assert proc.returncode == 0 and said in proc.stdout + proc.stderr, (args, proc.stdout,
                                                                            proc.stderr)
    assert (tmp_path / "page.html").is_file()


# --- help and argument errors ---------------------------------------------------------------

@pytest.mark.parametrize("command", ["", "demo", "replay", "doctor", "status"])
def test_help_for_every_command(home, command):
    proc = run_cli(*([command] if command else []), "--help", home=home)
    assert proc.returncode == 0, proc.stderr
    assert "usage:" in proc.stdout
    if command:
        assert "--json" in proc.stdout
    else:
        for sub in ("demo", "replay", "doctor", "status"):
            assert sub in proc.stdout


def test_bad_arguments_give_one_line(home):
    one_line_error(run_cli("demo", "--context-length", "32000", home=home), "64000")
    one_line_error(run_cli("demo", "--threshold", "1.5", home=home), "above 0 and below 1")
    one_line_error(run_cli("demo", "--threshold", "0.5", "--ratio", "0.6", home=home, env=LOCAL),
                   "--ratio")
    one_line_error(run_cli("frobnicate", home=home), "invalid choice")


# --- demo -------------------------------------------------------------------------------------

def test_demo_local_numbers_match_the_engine_state(home, tmp_path):
    store = tmp_path / "store"
    rep = report_of(run_cli("demo", "--turns", "14", "--context-length", "64000", "--json",
                            "--store", str(store), home=home, env=LOCAL))
    s = rep["summary"]
    assert rep["mode"] == "local" and "local only" in rep["mode_reason"]
    assert len(rep["turns"]) == 14 and s["turns"] == 14
    assert rep["store_kept"] and Path(rep["store_dir"]) == store.resolve()
    events = [json.loads(d) for (d,) in store_rows(
        store, "SELECT data FROM events WHERE kind='compaction' ORDER BY id")]
    assert s["compactions"] >= 2 and s["compactions"] == len(events) == len(rep["compactions"])
    assert s["local_compactions"] == s["compactions"] and s["gateway_compactions"] == 0
    assert s["tokens_saved"] == sum(e["tokens_before"] - e["tokens_after"] for e in events) > 0
    assert [c["tokens_after"] for c in rep["compactions"]] == [e["tokens_after"] for e in events]
    assert all(c["tokens_after"] <= rep["target_tokens"] for c in rep["compactions"])
    assert s["requests"] > 14 and s["invalid_requests"] == 0
    assert 0 < s["largest_request_tokens"] <= rep["context_length"]
    assert s["calibration"]["points"] > 0 and s["problems"] == []
    (archived,) = store_rows(store, "SELECT count(*) FROM archive WHERE session=?", rep["conversation"])[0]
    assert s["archived_items"] == archived > 0
    r = rep["recall"]
    assert r["ok"] and r["identical"] and r["left_context"]
    (content,) = store_rows(store, "SELECT content FROM archive WHERE tool_call_id=?", r["tool_call_id"])[0]
    assert len(content) == r["chars"] and content.startswith(r["preview"])
    assert s["messages_read"] > 14 * 3 and s["messages_now"] < s["messages_read"]

    # status reads the same store from another process
    st = report_of(run_cli("status", "--json", "--store", str(store), home=home))
    assert st["exists"] and st["compactions"]["total"] == len(events)
    assert st["compactions"]["tokens_saved"] == s["tokens_saved"]
    assert st["store"]["archived_items"] == archived
    (row,) = [x for x in st["sessions"] if x["session"] == rep["conversation"]]
    assert row["compactions"] == len(events) and row["archived_items"] == archived
    text = run_cli("status", "--store", str(store), home=home)
    assert text.returncode == 0 and "recent compactions:" in text.stdout
    last = text.stdout.splitlines()[1]
    assert last.startswith("  last compaction: ") and "locally" in last and "tdai_read_cos" in last
    assert format(events[-1]["tokens_before"], ",") in last and "tokens saved %s" % format(
        s["tokens_saved"], ",") in text.stdout
    assert not any(home.iterdir()), "the demo wrote into HERMES_HOME"


def test_demo_text_report_and_temporary_store(home):
    proc = run_cli("demo", "--turns", "10", "--context-length", "64000", home=home, env=LOCAL)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "mode: LOCAL" in out and "summary" in out and "context per turn" in out
    chart = [l for l in out.splitlines() if re.match(r"^\s*\d+ [█░tT ]+\|", l)]
    assert len(chart) == 10 and all("t" in l and "T" in l for l in chart)
    assert "all " in out and "requests valid" in out and "identical to the original" in out
    tmp_store = next(l for l in out.splitlines() if "archived:" in l).split(" in ")[1].split(" (")[0]
    assert not Path(tmp_store).exists(), "the temporary store was not removed"
    assert not any(home.iterdir())


def test_demo_gateway_mode_uses_the_gateway(home, tmp_path):
    gw = FakeGateway().start()
    try:
        env = {"TENCENTDB_OFFLOAD_GATEWAY_URL": gw.url}
        rep = report_of(run_cli("demo", "--turns", "14", "--context-length", "64000", "--json",
                                "--store", str(tmp_path / "s"), "--gateway", gw.url, home=home, env=env))
        s = rep["summary"]
        assert rep["mode"] == "gateway" and gw.url in rep["mode_reason"]
        assert s["gateway_compactions"] >= 1 and s["compactions"] >= 1
        assert len(gw.compact_calls(rep["gateway_session"])) >= s["gateway_compactions"]
        assert any(c["path"].startswith("gateway") for c in rep["compactions"])
        pairs = gw.ingested_pairs(rep["gateway_session"])
        assert len(pairs) == s["tool_results"] - 1       # every pair but the heartbeat one
        assert s["outbox_backlog"] == 0 and s["invalid_requests"] == 0 and rep["recall"]["ok"]
        text = run_cli("demo", "--turns", "3", "--context-length", "64000", "--gateway", gw.url,
                       home=home, env=env)
        assert text.returncode == 0 and "mode: GATEWAY" in text.stdout
    finally:
        gw.stop()


def test_demo_gateway_down_falls_back_to_local(home):
    down = "http://127.0.0.1:%d" % unused_port()
    rep = report_of(run_cli("demo", "--turns", "4", "--context-length", "64000", "--json",
                            "--gateway", down, home=home))
    assert rep["mode"] == "local" and "not usable" in rep["mode_reason"]
    gw = FakeGateway(api_key="right").start()
    try:       # up, but refusing our key: local, and the reason says so
        env = {"TENCENTDB_OFFLOAD_API_KEY": "wrong"}
        rep = report_of(run_cli("demo", "--turns", "3", "--context-length", "64000", "--json",
                                "--gateway", gw.url, home=home, env=env))
        assert rep["mode"] == "local" and "refused the API key" in rep["mode_reason"]
    finally:
        gw.stop()


# --- replay -----------------------------------------------------------------------------------

def _check_replay(rep: dict, messages: list, turns: int) -> None:
    s = rep["summary"]
    assert s["messages_read"] == len(messages) and s["turns"] == turns
    assert s["compactions"] >= 1 and s["invalid_requests"] == 0
    assert s["largest_request_tokens"] <= rep["context_length"]
    assert rep["recall"]["ok"] and rep["recall"]["left_context"]


@pytest.mark.parametrize("kind", ["json", "jsonl", "export"])
def test_replay_files(home, tmp_path, kind):
    shape = "anthropic" if kind == "jsonl" else "openai"
    msgs = [{"role": "system", "content": "You are a test agent."}] + \
        conversation(12, 30_000, shape=shape, calls=1)
    path = tmp_path / ("session." + ("jsonl" if kind == "jsonl" else "json"))
    if kind == "json":
        path.write_text(json.dumps(msgs))
    elif kind == "jsonl":
        path.write_text("\n".join(json.dumps(m) for m in msgs) + "\n")
    else:
        path.write_text(json.dumps({"id": "exported-1", "system_prompt": "sys", "messages": msgs}))
    rep = report_of(run_cli("replay", str(path), "--context-length", "64000", "--json",
                            home=home, env=LOCAL))
    _check_replay(rep, msgs, 12)
    assert rep["source"]["kind"] == {"json": "json", "jsonl": "jsonl", "export": "hermes-export"}[kind]


def _mini_state_db(path: Path, with_active: bool) -> list:
    """A Hermes-like state.db (0.17 has no ``compacted``; older ones no ``active``)."""
    conn = sqlite3.connect(str(path))
    conn.execute("CREATE TABLE sessions (id TEXT PRIMARY KEY, source TEXT, system_prompt TEXT, "
                 "message_count INTEGER)")
    conn.execute("CREATE TABLE messages (id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT, "
                 "role TEXT, content TEXT, tool_call_id TEXT, tool_calls TEXT, tool_name TEXT, "
                 "timestamp REAL%s)" % (", active INTEGER NOT NULL DEFAULT 1" if with_active else ""))
    msgs = conversation(10, 30_000)
    conn.execute("INSERT INTO sessions VALUES ('20260101_000000_abcdef', 'cli', 'sys', ?)", (len(msgs),))
    for m in msgs:
        conn.execute("INSERT INTO messages(session_id, role, content, tool_call_id, tool_calls, "
                     "tool_name, timestamp) VALUES (?,?,?,?,?,?,0)",
                     ("20260101_000000_abcdef", m["role"], m.get("content"), m.get("tool_call_id"),
                      json.dumps(m["tool_calls"]) if m.get("tool_calls") else None, None))
    if with_active:   # a rewound row must not be replayed
        conn.execute("INSERT INTO messages(session_id, role, content, timestamp, active) "
                     "VALUES ('20260101_000000_abcdef', 'user', 'rewound', 0, 0)")
    conn.commit()
    conn.close()
    return msgs


@pytest.mark.parametrize("with_active", [True, False])
def test_replay_session_id_from_state_db(home, with_active):
    msgs = _mini_state_db(home / "state.db", with_active)
    before = (home / "state.db").stat().st_mtime_ns
    rep = report_of(run_cli("replay", "20260101_000000_abcdef", "--context-length", "64000",
                            "--json", home=home, env=LOCAL))
    _check_replay(rep, msgs, 10)
    assert rep["source"]["kind"] == "hermes-session"
    assert (home / "state.db").stat().st_mtime_ns == before
    one_line_error(run_cli("replay", "20991231_nope", home=home, env=LOCAL), "no session")


def test_replay_bad_sources_give_one_line(home, tmp_path):
    one_line_error(run_cli("replay", str(tmp_path / "missing.json"), home=home), "no such file")
    garbage = tmp_path / "garbage.json"
    garbage.write_bytes(b"\x00\x01 not json {{{\n")
    one_line_error(run_cli("replay", str(garbage), home=home), "cannot parse")
    notmsgs = tmp_path / "numbers.json"
    notmsgs.write_text("[1, 2, 3]")
    one_line_error(run_cli("replay", str(notmsgs), home=home), "not a chat message")
    one_line_error(run_cli("replay", "20260101_000000_unknown", home=home),
                   "no Hermes session database")


def test_status_without_a_store(home):
    st = report_of(run_cli("status", "--json", home=home))
    assert st["exists"] is False and st["store_dir"].startswith(str(home))
    assert not (home / "tencentdb-offload").exists()


def test_status_of_a_corrupt_store_is_an_error_and_changes_nothing(home, tmp_path):
    store = tmp_path / "bad"
    store.mkdir()
    (store / "store.db").write_bytes(b"this is not sqlite" * 100)
    one_line_error(run_cli("status", "--store", str(store), home=home), "cannot read")
    assert sorted(p.name for p in store.iterdir()) == ["store.db"]


def test_plugin_dir_leaves_sys_path_so_hermes_tools_is_not_shadowed(home, tmp_path):
    """``python3 <plugin dir>`` puts the plugin dir first on sys.path, where our tools.py would
    shadow Hermes' ``tools`` package; __main__ must take it out before importing anything."""
    host = tmp_path / "host"
    (host / "tools").mkdir(parents=True)
    (host / "tools" / "__init__.py").write_text("WHO = 'host'\n")
    probe = ("import os, sys, tools\n"
             "print('ROOT_ON_PATH', any(os.path.realpath(p or '.') == %r for p in sys.path), tools.WHO)\n"
             % os.path.realpath(str(ROOT)))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TENCENTDB_OFFLOAD_", "HERMES_"))}
    env.update(HERMES_HOME=str(home), PYTHONDONTWRITEBYTECODE="1", PYTHONPATH=str(host))
    for target in (str(ROOT), "."):           # by path, and from inside the plugin directory
        proc = subprocess.run([sys.executable, "-i", target, "status", "--help"], input=probe,
                              capture_output=True, text=True, env=env, cwd=str(ROOT), timeout=60)
        assert "ROOT_ON_PATH False host" in proc.stdout, proc.stdout + proc.stderr


# --- issue 11: demo and replay stay local; replay runs with the session's own settings ------

def test_demo_and_replay_send_nothing_to_the_configured_gateway(home, tmp_path):
    gw = FakeGateway().start()
    try:
        (home / ".env").write_text("TENCENTDB_OFFLOAD_GATEWAY_URL=%s\n" % gw.url)
        demo = run_cli("demo", "--turns", "8", "--context-length", "64000", home=home)
        assert demo.returncode == 0, demo.stderr
        assert "mode: LOCAL" in demo.stdout and "--gateway URL" in demo.stdout
        msgs = conversation(10, 30_000)
        path = tmp_path / "s.json"
        path.write_text(json.dumps(msgs))
        rep = report_of(run_cli("replay", str(path), "--context-length", "64000", "--json", home=home))
        assert rep["mode"] == "local" and rep["summary"]["compactions"] >= 1
        assert list(gw.requests) == [], "demo/replay contacted the configured Gateway"
    finally:
        gw.stop()


def _compacted_state_db(path: Path) -> tuple:
    """A 0.19-style state.db of one session compacted in place once: the replaced rows stay
    with active=0, compacted=1; the compaction wrote a summary plus copies of the kept tail."""
    conn = sqlite3.connect(str(path))
    conn.execute("CREATE TABLE sessions (id TEXT PRIMARY KEY, source TEXT, system_prompt TEXT, "
                 "message_count INTEGER, parent_session_id TEXT)")
    conn.execute("CREATE TABLE messages (id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT, "
                 "role TEXT, content TEXT, tool_call_id TEXT, tool_calls TEXT, tool_name TEXT, "
                 "timestamp REAL, active INTEGER NOT NULL DEFAULT 1, compacted INTEGER NOT NULL DEFAULT 0)")
    msgs = conversation(12, 30_000)
    first, later = msgs[:24], msgs[24:]
    sid = "20260102_000000_c0ffee"

    def put(m, ts, active=1, compacted=0):
        conn.execute("INSERT INTO messages(session_id, role, content, tool_call_id, tool_calls, "
                     "timestamp, active, compacted) VALUES (?,?,?,?,?,?,?,?)",
                     (sid, m["role"], m.get("content"), m.get("tool_call_id"),
                      json.dumps(m["tool_calls"]) if m.get("tool_calls") else None, ts, active, compacted))
    for i, m in enumerate(first):
        put(m, 1000.0 + i, active=0, compacted=1)
    put({"role": "user", "content": "[CONTEXT COMPACTION — REFERENCE ONLY] earlier turns ..."}, 2000.0)
    for i, m in enumerate(first[-3:]):           # the kept tail, written back by the compaction
        put(m, 2000.0 + (i + 1) * 1e-6)          # (one batch, microseconds apart)
    for i, m in enumerate(later):
        put(m, 3000.0 + i)
    put({"role": "user", "content": "rewound"}, 4000.0, active=0, compacted=0)
    conn.execute("INSERT INTO sessions VALUES (?, 'cli', 'sys', ?, NULL)", (sid, 4 + len(later)))
    conn.commit()
    conn.close()
    return sid, msgs


def test_replay_reads_compacted_rows_and_the_configured_window(home):
    sid, msgs = _compacted_state_db(home / "state.db")
    (home / "config.yaml").write_text("model:\n  context_length: 64000\n"
                                      "tencentdb_offload:\n  threshold: 0.7\n")
    rep = report_of(run_cli("replay", sid, "--json", home=home, env=LOCAL))
    src, s = rep["source"], rep["summary"]
    assert rep["context_length"] == 64_000 and "config.yaml" in rep["window_from"]
    assert rep["threshold"] == 0.7 and "config.yaml" in rep["threshold_from"]
    assert src["compacted_rows"] == 24 and src["inactive_rows_skipped"] == 1
    assert src["live_compactions"] == 1
    assert s["messages_read"] == len(msgs) and s["turns"] == 12
    assert any("3 rows that compactions wrote back" in g for g in src["not_reconstructed"])
    assert any("1 compaction summary" in g for g in src["not_reconstructed"])
    assert s["compactions"] >= 1 and s["invalid_requests"] == 0
    text = run_cli("replay", sid, home=home, env=LOCAL)
    assert "window 64,000 tokens (from model.context_length in" in text.stdout
    assert "not reconstructed: 1 compaction summary skipped" in text.stdout
    flag = report_of(run_cli("replay", sid, "--json", "--context-length", "100000", "--threshold",
                             "0.8", home=home, env=LOCAL))
    assert flag["context_length"] == 100_000 and flag["window_from"] == "--context-length"
    assert flag["threshold"] == 0.8 and flag["threshold_from"] == "--threshold"


def test_demo_marks_requests_over_the_trigger_and_says_what_was_archived(home):
    # a shallow landing (0.5): a later turn crosses the trigger before its compaction
    args = ("demo", "--turns", "12", "--context-length", "64000", "--ratio", "0.5")
    proc = run_cli(*args, home=home, env=LOCAL)
    out = proc.stdout
    assert proc.returncode == 0, proc.stderr
    rep = report_of(run_cli(*args, "--json", home=home, env=LOCAL))
    over = [t for t in rep["turns"] if t["over_trigger"]]
    assert over and all(t["peak_tokens"] >= rep["threshold_tokens"] and t["action"] == "-" for t in over)
    assert "over*" in out and "* over the trigger, no compaction yet" in out
    s = rep["summary"]
    assert s["archived_items"] == s["archived_tool_results"] + s["archived_messages"]
    line = next(l for l in out.splitlines() if "archived:" in l)
    assert "every tool result as it arrived" in line and "a compaction removed" in line
