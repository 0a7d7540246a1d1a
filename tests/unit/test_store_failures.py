"""When the archive cannot be written, writes wait (capped) and are retried, and the writer
says so; nothing is dropped silently (issue 10 item 9)."""

import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

import tencentdb_offload as plugin
from tencentdb_offload.archive.store import ArchiveItem, Store
from tencentdb_offload.archive.writer import StoreWriter

from helpers import count_archived, env_for, wait_for

TESTS = Path(__file__).resolve().parent.parent




def _item(i, size=100):
    return ArchiveItem("tool_result", ("%d " % i) * size, "c%d" % i, "t")


@pytest.fixture
def quick_busy():
    saved = Store.BUSY_TIMEOUT_S, StoreWriter.RETRY_MIN_S
    Store.BUSY_TIMEOUT_S, StoreWriter.RETRY_MIN_S = 0.2, 0.05
    yield
    Store.BUSY_TIMEOUT_S, StoreWriter.RETRY_MIN_S = saved


def test_a_store_locked_by_another_process_is_retried_not_dropped(tmp_path, quick_busy):
    st = Store(tmp_path)
    w = StoreWriter(st)
    blocker = sqlite3.connect(str(st.path), isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")                 # another process holds the write lock
    try:
        for i in range(50):
            w.submit(Store.op_archive("s", [_item(i)], time.time()))
        assert wait_for(lambda: w.stats()["retrying"] == 50, timeout=10.0)
        stats = w.stats()
        assert not w.writable and stats["lost"] == 0 and "locked" in stats["last_error"]
        assert not w.flush(0.3)                        # not claimed as written
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert w.flush(10)
    assert count_archived(st, "s") == 50 and w.writable and w.stats()["last_error"] == ""
    w.close()


def test_what_waits_is_capped_and_the_loss_is_reported(tmp_path, quick_busy):
    st = Store(tmp_path)
    w = StoreWriter(st)
    w.MAX_WAITING_BYTES = 50_000
    blocker = sqlite3.connect(str(st.path), isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    try:
        w.submit(Store.op_archive("s", [_item(0)], time.time()))
        assert wait_for(lambda: w.stats()["retrying"] == 1, timeout=10.0)
        for i in range(1, 200):
            w.submit(Store.op_archive("s", [_item(i, 1000)], time.time()))
        stats = w.stats()
        assert stats["waiting_bytes"] <= 50_000 and stats["lost"] > 0
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert w.flush(10)
    kept = count_archived(st, "s")
    assert kept + w.stats()["lost"] == 200
    assert wait_for(lambda: st.stats().writes_lost == w.stats()["lost"], timeout=10.0)   # doctor/status see it
    w.close()


DISK_FULL = r"""
import json, resource, signal, sys, time
sys.path.insert(0, sys.argv[1])
from conftest import load_plugin
load_plugin()
from tencentdb_offload.archive.store import ArchiveItem, Store
from tencentdb_offload.archive.writer import StoreWriter
from helpers import count_archived
StoreWriter.RETRY_MIN_S = 0.05
st = Store(sys.argv[2])
w = StoreWriter(st)
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)        # EFBIG instead of being killed
soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
resource.setrlimit(resource.RLIMIT_FSIZE, (256 * 1024, hard))   # the disk is "full"
for i in range(20):
    w.submit(Store.op_archive("s", [ArchiveItem("tool_result", "x%d" % i * 20000, "c%d" % i)],
                              time.time()))
deadline = time.monotonic() + 20
while w.stats()["retrying"] < 1 and time.monotonic() < deadline:
    time.sleep(0.02)
during = w.stats()
resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))          # space freed
flushed = w.flush(20)
print(json.dumps({"during": during, "flushed": flushed, "archived": count_archived(st, "s"),
                  "after": w.stats()}))
"""


def test_disk_full_writes_wait_and_land_when_space_returns(tmp_path):
    proc = subprocess.run([sys.executable, "-c", DISK_FULL, str(TESTS), str(tmp_path)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.splitlines()[-1])
    assert out["during"]["retrying"] >= 1 and not out["during"]["healthy"]
    assert "full" in out["during"]["last_error"] or "I/O" in out["during"]["last_error"]
    assert out["flushed"] and out["archived"] == 20
    assert out["after"]["healthy"] and out["after"]["lost"] == 0


def test_no_store_yet_rows_wait_and_are_written_once_it_can_be_opened(tmp_path, quick_busy):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    rt = plugin.build_runtime(env=dict(env_for(tmp_path),
                                       TENCENTDB_OFFLOAD_STORE_DIR=str(blocker / "sub")))
    try:
        assert rt.store is None
        rt.writer.submit(Store.op_archive("s", [_item(1)], time.time()))
        assert wait_for(lambda: rt.writer.stats()["retrying"] == 1, timeout=10.0)
        status = rt.status()
        assert status["writer"]["healthy"] is False and status["writer"]["lost"] == 0
        assert "cannot create" in status["writer"]["last_error"]
        blocker.unlink()                                 # the operator fixes the directory
        assert rt.writer.flush(10)
    finally:
        rt.close()
    assert count_archived(Store(blocker / "sub"), "s") == 1


def test_a_compaction_over_a_locked_archive_promises_no_recall_and_removes_less(tmp_path, quick_busy):
    from helpers import conversation, make_engine
    from tencentdb_offload.context import messages

    def notice(out):
        return next(messages.text_of(m) for m in out if messages.NOTICE_MARK in messages.text_of(m))

    conv = conversation(120, 1500)           # trimming alone cannot reach the target
    # a 32K target: what a healthy archive lets leave and what a locked one keeps differ
    rt_ok, eng_ok = make_engine(tmp_path / "ok", compact_ratio="0.5")
    healthy = eng_ok.compress(conv, current_tokens=70_000)
    assert "Nothing is lost" in notice(healthy)
    rt_ok.close()

    rt, eng = make_engine(tmp_path / "locked", compact_ratio="0.5")
    blocker = sqlite3.connect(str(rt.store.path), isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    try:
        rt.writer.submit(Store.op_archive("s1", [_item(1)], time.time()))
        assert wait_for(lambda: not rt.writer.writable, timeout=10.0)
        out = eng.compress(conv, current_tokens=70_000)
        text = notice(out)
        assert "Nothing is lost" not in text and "cannot be written" in text
        assert messages.validation_errors(out) == []
        assert len(out) > len(healthy), "with no archive, fewer messages leave"
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert rt.writer.flush(10) and rt.writer.writable
    rt.close()


def test_status_says_when_archive_writes_wait(tmp_path, quick_busy):
    from helpers import make_engine
    from tencentdb_offload.host.command import make_command
    rt, _eng = make_engine(tmp_path)
    assert "ARCHIVE WRITES WAITING" not in make_command(rt)("status")
    blocker = sqlite3.connect(str(rt.store.path), isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    try:
        rt.writer.submit(Store.op_archive("s1", [_item(1)], time.time()))
        assert wait_for(lambda: not rt.writer.writable, timeout=10.0)
        text = make_command(rt)("status")
        assert "ARCHIVE WRITES WAITING: 1 retrying" in text and "locked" in text, text
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    rt.close()
