"""The store file changes under a running process (issue 16 items 12-14): deleted, replaced by
garbage, overwritten in place, its WAL removed. Each time the process notices, keeps the broken
file, carries on with a working one (restoring what the open copy holds), re-sends what it
holds, and says so in status; nothing recorded afterwards is lost to a restart."""

import json
import os
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import tencentdb_offload as plugin
from tencentdb_offload.engine import TencentDBOffloadEngine
from tencentdb_offload.hooks import HookHandlers
from tencentdb_offload.archive.store import ArchiveItem, Store

from helpers import archive_items, count_archived, env_for

TESTS = Path(__file__).resolve().parent.parent


def _record(hooks, sid, first, n):
    for i in range(first, first + n):
        hooks.post_tool_call(tool_name="read_file", args={"i": i}, session_id=sid,
                             tool_call_id="call_%d" % i, result="result number %d " % i + "y" * 200)


def _recall_in_a_new_thread(rt, sid, call_id):
    out = []

    def run():
        eng = TencentDBOffloadEngine(rt)
        eng.update_model(model="m", context_length=64_000)
        eng.on_session_start(sid)
        out.append(json.loads(eng.handle_tool_call("tdai_read_cos", {"tool_call_id": call_id})))
    t = threading.Thread(target=run)
    t.start()
    t.join()
    return out[0]


def _checkpoint(path):
    conn = sqlite3.connect(str(path))
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()


def _delete(path):
    path.unlink()


def _replace_with_garbage(path):
    junk = path.with_name("junk")
    junk.write_bytes(b"\x00garbage" * 4096)
    os.replace(junk, path)


def _overwrite_in_place(path):
    _checkpoint(path)                       # the data is in the main file, not only the WAL
    with open(path, "wb") as f:             # same inode, garbage content
        f.write(b"\x00garbage" * 4096)


def _remove_wal(path):
    Path(str(path) + "-wal").unlink()


@pytest.mark.parametrize("damage, kept_before, what", [
    (_delete, 10, "deleted"), (_replace_with_garbage, 10, "replaced"),
    (_overwrite_in_place, 0, "not a database"), (_remove_wal, 10, "without its WAL")])
def test_a_store_damaged_while_live_is_noticed_kept_and_recreated(tmp_path, damage, kept_before, what):
    env = env_for(tmp_path)
    rt = plugin.build_runtime(env=env)
    hooks = HookHandlers(rt)
    _record(hooks, "s", 0, 10)
    assert rt.flush()
    path = rt.store.path
    damage(path)
    _record(hooks, "s", 10, 30)
    assert rt.flush()
    got = _recall_in_a_new_thread(rt, "s", "call_25")
    assert got["ok"] and got["content"].startswith("result number 25"), got
    status = rt.status()
    assert status["writer"]["healthy"] and status["writer"]["lost"] == 0
    recovery = status["store"]["last_recovery"]
    assert what in recovery and status["store"]["recoveries"] == 1, recovery
    assert status["writer"]["store_recoveries"] == [recovery]
    if damage is not _delete:               # what was there is kept for the user
        assert list(tmp_path.glob("home/**/store.db.broken-*")) or list(
            path.parent.glob("store.db.broken-*")), list(path.parent.iterdir())
    rt.close()
    again = Store(path.parent)                               # a restart
    assert count_archived(again, "s") == kept_before + 30
    again.close()


LOST_WAL = r"""
import os, sqlite3, sys, time
path = os.path.join(sys.argv[1], "store.db")
conn = sqlite3.connect(path, isolation_level=None)     # a process that does not check
conn.execute("PRAGMA journal_mode=WAL")
conn.execute("CREATE TABLE t(x)")
conn.execute("INSERT INTO t VALUES (1)")
os.remove(path + "-wal")
conn.execute("INSERT INTO t VALUES (2)")
print("ready", flush=True)
sys.stdin.read()                                        # stays alive, holding the files
"""


def test_a_start_beside_a_process_that_lost_the_wal_recovers_instead_of_refusing(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", LOST_WAL, str(tmp_path)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        st = Store(tmp_path)        # old code: "cannot open store.db: disk I/O error", every start
        archive_items(st, "s", [ArchiveItem("message", "after", role="user")])
        assert count_archived(st, "s") == 1 and "corrupt" in st.last_error
        assert list(tmp_path.glob("store.db.corrupt-*"))
        st.close()
    finally:
        proc.stdin.close()
        proc.wait(60)
    again = Store(tmp_path)
    assert count_archived(again, "s") == 1
    again.close()


def test_two_stores_on_one_file_converge_on_the_restored_one(tmp_path):
    one, two = Store(tmp_path), Store(tmp_path)     # as two processes sharing the store
    archive_items(one, "s", [ArchiveItem("message", "first", role="user")])
    one.path.unlink()
    assert one.check()                              # restores from its open copy
    assert two.check()                              # finds a good store there: uses it
    assert "another good store" in two.recoveries[-1]
    archive_items(two, "s", [ArchiveItem("message", "second", role="user")])
    assert count_archived(one, "s") == count_archived(two, "s") == 2
    assert not one.check() and not two.check()
    one.close()
    two.close()
