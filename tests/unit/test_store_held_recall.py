"""While another process holds the store's write lock, a recall does not wait the lock out on
every call, and an item only held in memory is said to be waiting, not missing; a seal key
that could not be written leaves no temporary file behind."""

import errno
import json
import os
import sqlite3
import time

from tencentdb_offload.archive import seal_key
from tencentdb_offload.archive.recall import READ, SEARCH, RecallTools
from tencentdb_offload.archive.store import ArchiveItem, Store
from tencentdb_offload.archive.writer import StoreWriter

from helpers import archive_items, wait_for


def test_a_flush_does_not_wait_out_a_retry_stuck_on_another_process_lock(tmp_path, monkeypatch):
    monkeypatch.setattr(Store, "BUSY_TIMEOUT_S", 3.0)
    st = Store(tmp_path)
    w = StoreWriter(st)
    blocker = sqlite3.connect(str(st.path), isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    try:
        w.submit(Store.op_archive("s", [ArchiveItem("tool_result", "x", "c1")], time.time()))
        assert wait_for(lambda: not w.writable and w.stats()["retrying"] == 1, timeout=10)
        # A flush that waited for the retry would wait the lock out: BUSY_TIMEOUT_S. Each
        # returns after at most HELD_WAIT_S; the bound is half the lock's wait (not a tight
        # figure, so a loaded machine does not fail it) and still tells the two apart.
        bound = Store.BUSY_TIMEOUT_S / 2
        started = time.monotonic()
        assert w.flush(5) is False                  # asks for a retry that now waits on the lock
        assert time.monotonic() - started < bound
        time.sleep(StoreWriter.HELD_WAIT_S)
        for _ in range(3):                          # that retry waits on: no flush waits for it
            started = time.monotonic()
            assert w.flush(5) is False and w.last_flush.startswith("held for retry")
            assert time.monotonic() - started < bound
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert wait_for(lambda: w.flush(1), timeout=20)
    w.close()
    st.close()


def test_a_recall_does_not_wait_out_a_first_write_stuck_on_another_process_lock(tmp_path,
                                                                                monkeypatch):
    monkeypatch.setattr(Store, "BUSY_TIMEOUT_S", 4.0)
    st = Store(tmp_path)
    w = StoreWriter(st)
    blocker = sqlite3.connect(str(st.path), isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    try:
        w.submit(Store.op_archive("s1", [ArchiveItem("tool_result", "x", "c1")], time.time()))
        tools = RecallTools(st, w.flush)
        for name, args in ((READ, {"key": "c1"}), (SEARCH, {"query": "x"})):
            started = time.monotonic()       # the write's first attempt waits on the lock
            answer = json.loads(tools.handle(name, args, "s1", ""))
            # a recall that waited for the write would wait the lock out (BUSY_TIMEOUT_S);
            # half of it tells the two apart without a tight figure
            assert time.monotonic() - started < Store.BUSY_TIMEOUT_S / 2, name
            assert "waiting to be written" in answer.get("error", answer.get("note", "")), answer
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert wait_for(lambda: w.flush(1), timeout=20)
    assert json.loads(RecallTools(st, w.flush).handle(READ, {"key": "c1"}, "s1", ""))["ok"]
    w.close()
    st.close()


def test_an_item_held_in_memory_is_said_to_be_waiting(tmp_path):
    st = Store(tmp_path)
    tools = RecallTools(st, lambda _wait: False)          # the flush says writes are held
    answer = json.loads(tools.handle(READ, {"key": "c1"}, "s1", ""))
    assert not answer["ok"] and "waiting to be written" in answer["error"]
    assert "nothing archived under" in json.loads(
        RecallTools(st, lambda _wait: True).handle(READ, {"key": "c1"}, "s1", ""))["error"]
    st.close()


def test_a_search_while_writes_are_held_says_so_instead_of_finding_nothing(tmp_path):
    st = Store(tmp_path)
    archive_items(st, "s1", [ArchiveItem("tool_result", "an older zebra", "c0", "t")])
    tools = RecallTools(st, lambda _wait: False)
    held = json.loads(tools.handle(SEARCH, {"query": "zebra"}, "s1", ""))
    assert held["ok"] and held["count"] == 1 and "waiting to be written" in held["note"]
    none = json.loads(tools.handle(SEARCH, {"query": "giraffe"}, "s1", ""))
    assert none["count"] == 0 and "waiting to be written" in none["note"]
    assert "note" not in json.loads(
        RecallTools(st, lambda _wait: True).handle(SEARCH, {"query": "giraffe"}, "s1", ""))
    st.close()


def test_a_seal_key_that_could_not_be_written_leaves_no_temporary_file(tmp_path, monkeypatch):
    class Full:
        def __init__(self, fd, mode):
            self.fd = fd

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            os.close(self.fd)

        def write(self, data):
            raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(seal_key.os, "fdopen", Full)
    seal, problem = seal_key.load_seal(tmp_path)
    assert "No space left" in problem
    assert sorted(p.name for p in tmp_path.iterdir()) == []
