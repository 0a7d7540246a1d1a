"""``python3 <plugin dir> archive ...`` (issue 18 item 10): list, show, search, export and forget,
without Hermes, on a store another process is writing."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import subprocess
import sys
import time

from tencentdb_offload.archive.outbox import Outbox
from tencentdb_offload.archive.store import ArchiveItem, Store
from tencentdb_offload.context.item_key import message_key

from test_cli import ROOT, run_cli
from helpers import alias, count_archived

BIG = ("résumé 日本語 \"quoted\" \\ back\tslash\n" * 9000)      # ~300K chars, crosses chunks


def _fill(home):
    st = Store(home / "tencentdb-offload")
    now = time.time()
    st.transaction([
        Store.op_archive("alice", [ArchiveItem("message", "the plan: ship on Friday", role="user"),
                                   ArchiveItem("tool_result", BIG, "call_0", "read_file",
                                               args={"path": "/x"})], now - 60),
        Store.op_archive("bob", [ArchiveItem("tool_result", "bob's own output \x1b[2J", "call_0",
                                             "grep")], now),
        Outbox.op_enqueue("alice", "pair", {"tool_call_id": "call_0", "result": BIG}, now),
    ])
    alias(st, "alice-rotated", "alice")
    st.transaction([Store.op_archive("alice-rotated", [ArchiveItem("message", "after rotation",
                                                                   role="assistant")], now)])
    return st


def _digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_list_show_search_export_read_only_while_another_process_writes(tmp_path):
    home = tmp_path / "home"
    st = _fill(home)                      # stays open: a live writer holds the store (WAL)
    out = json.loads(run_cli("archive", "--json", "list", home=home).stdout)
    assert {c["session"]: (c["items"], c["messages"], c["tool_results"]) for c in out} == {
        "alice": (2, 1, 1), "bob": (1, 0, 1), "alice-rotated": (1, 1, 0)}
    text = run_cli("archive", "list", home=home).stdout
    assert "alice  2 items (1 message, 1 tool result)" in text

    amb = run_cli("archive", "show", "call_0", home=home)
    assert amb.returncode == 1 and "names 2 items" in amb.stderr
    page = json.loads(run_cli("archive", "--json", "show", "call_0", "--session", "alice",
                              "--offset", "10", "--limit", "1000", home=home).stdout)
    assert page["content"] == BIG[10:1010] and page["next_offset"] == 1010
    assert page["total_chars"] == len(BIG)
    key = message_key("user", "the plan: ship on Friday")
    shown = run_cli("archive", "show", key, home=home).stdout
    assert "the plan: ship on Friday" in shown and key in shown
    bob = run_cli("archive", "show", "call_0", "--session", "bob", home=home).stdout
    assert "bob's own output" in bob and "\x1b" not in bob          # safe for a terminal

    st.transaction([Store.op_archive("bob", [ArchiveItem("message", "FRIDAY again", role="user")],
                                     time.time())])              # written between two reads
    hits = json.loads(run_cli("archive", "--json", "search", "friday", home=home).stdout)
    assert {(h["session"], h["key"]) for h in hits} == {
        ("alice", key), ("bob", message_key("user", "FRIDAY again"))}

    exported = run_cli("archive", "export", "alice", home=home)
    assert exported.returncode == 0, exported.stderr
    rows = [json.loads(line) for line in exported.stdout.splitlines()]
    assert [r["key"] for r in rows] == [key, "call_0", message_key("assistant", "after rotation")]
    assert rows[1]["content"] == BIG and json.loads(rows[1]["args"]) == {"path": "/x"}
    assert [r["session"] for r in rows] == ["alice", "alice", "alice-rotated"]
    st.close()
    missing = run_cli("archive", "export", "nobody", home=home)
    assert missing.returncode == 1 and "nothing archived in nobody" in missing.stderr


def test_reads_leave_a_store_byte_identical(tmp_path):
    home = tmp_path / "home"
    _fill(home).close()
    files = sorted((home / "tencentdb-offload").glob("store.db*"))
    before = {p.name: _digest(p) for p in files if not p.name.endswith(("-wal", "-shm"))}
    for args in (["list"], ["show", "#1"], ["search", "plan"], ["export", "alice"]):
        assert run_cli("archive", *args, home=home).returncode == 0, args
    after = {p.name: _digest(p) for p in sorted((home / "tencentdb-offload").glob("store.db*"))
             if not p.name.endswith(("-wal", "-shm"))}
    assert after == before


def test_no_store_is_one_line_and_creates_nothing(tmp_path):
    home = tmp_path / "home"
    proc = run_cli("archive", "list", home=home)       # nothing archived yet is not an error
    assert proc.returncode == 0 and "nothing archived yet" in proc.stdout, proc.stderr
    proc = run_cli("archive", "show", "#1", home=home)  # asking for an item that cannot exist is
    assert proc.returncode == 1 and "no archive at" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert not (home / "tencentdb-offload" / "store.db").exists()


HOLD = r"""
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")          # another process holds the write lock for a while
conn.execute("INSERT INTO archive(session,item_key,kind,content,chars,created) "
             "VALUES ('carol','k','message','c',1,0)")
print("held", flush=True)
time.sleep(1.0)
conn.execute("COMMIT")
"""


def test_forget_says_what_it_would_remove_then_removes_one_conversation_under_the_write_lock(tmp_path):
    home = tmp_path / "home"
    st = _fill(home)
    dry = run_cli("archive", "forget", "alice", home=home)
    assert dry.returncode == 0 and "would remove from alice: 3 archive, 1 outbox" in dry.stdout
    assert "1 aliases" in dry.stdout and count_archived(st, "alice") == 2
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(st.path)], stdout=subprocess.PIPE,
                              text=True)
    assert holder.stdout.readline().strip() == "held"
    done = run_cli("archive", "--json", "forget", "alice", "--yes", home=home)
    holder.wait(60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"archive": 3, "outbox": 1, "outbox_leases": 0,
                                       "events": 0, "handover": 0, "aliases": 1}
    conn = sqlite3.connect(str(st.path))
    sessions = {r[0] for r in conn.execute("SELECT session FROM archive")}
    assert sessions == {"bob", "carol"}                 # the holder's commit landed too
    assert conn.execute("SELECT count(*) FROM outbox").fetchone()[0] == 0
    assert conn.execute("SELECT count(*) FROM aliases").fetchone()[0] == 0
    conn.close()
    raw = b"".join(p.read_bytes() for p in st.path.parent.glob("store.db*"))
    assert b"ship on Friday" not in raw                 # overwritten, not just unlinked
    st.close()


def test_forget_removes_what_a_process_handed_over_and_works_on_a_store_before_it(tmp_path):
    """The canvas pin (the Gateway's map of the task) and calibration a process leaves the next
    stayed after `archive forget --yes`; a store from before that table still forgets."""
    home = tmp_path / "home"
    st = _fill(home)
    canvas = "graph TD; A[migrate the payroll database] --> B[secret-project-zebra]"
    st.transaction([Store.op_handover("alice", "pin", ["anchor", canvas], time.time()),
                    Store.op_handover("bob", "pin", ["anchor", "bob's canvas"], time.time())])
    done = run_cli("archive", "--json", "forget", "alice", "--yes", home=home)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["handover"] == 1
    assert set(st.get_handover("bob")) == {"pin"} and st.get_handover("alice") == {}
    st.close()
    raw = b"".join(p.read_bytes() for p in st.path.parent.glob("store.db*"))
    assert b"secret-project-zebra" not in raw
    conn = sqlite3.connect(str(st.path))
    conn.execute("DROP TABLE handover")             # as 0.2.0 left a store
    conn.close()
    old = run_cli("archive", "--json", "forget", "bob", "--yes", home=home)
    assert old.returncode == 0 and "handover" not in json.loads(old.stdout), old.stderr
