"""The writer tells the truth about the archive: writable only while writes land, and a flush
returns as soon as the writes it waits for are held for a retry (issue 16 item 15)."""

import time

from tencentdb_offload.archive.store import ArchiveItem, Store
from tencentdb_offload.archive.writer import StoreWriter
from helpers import count_archived


def test_disk_full_makes_the_writer_unwritable_and_flush_return_at_once(tmp_path):
    st = Store(tmp_path)
    w = StoreWriter(st)
    w.RETRY_MIN_S = w.RETRY_MAX_S = 3600.0        # retries happen only when a flush asks
    full = [True]

    def disk(conn):         # SQLite's own "database or disk is full", while ``full`` says so
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        conn.execute("PRAGMA max_page_count=%d" % (pages if full[0] else 1 << 30))

    assert w.writable and w.settled(30)
    for i in range(5):
        w.submit(disk, Store.op_archive("s", [ArchiveItem("tool_result", "x" * 50_000, "c%d" % i)],
                                        time.time()))
    assert w.flush(600) is False                  # not the whole 600 s: the attempt failed
    assert w.last_flush.startswith("held for retry") and "full" in w.last_flush
    assert not w.writable and not w.settled(600)
    stats = w.stats()
    assert stats["writable"] is False and stats["retrying"] == 5 and stats["lost"] == 0
    full[0] = False                               # space freed
    assert w.flush(600) and w.writable and w.last_flush == "written"
    assert count_archived(st, "s") == 5
    w.close()


def test_a_flush_that_saw_the_write_land_sees_the_store_writable(tmp_path):
    """The flush wakes when the writes are committed; the bookkeeping after a commit (clearing
    the error, counting lost writes, waking readers) may lag behind it. Writability must not:
    it was said under the commit's own lock (a unit run once saw flush True, writable False)."""
    class SlowAfterCommit(StoreWriter):
        def _recovered(self, *args):
            time.sleep(0.3)                 # the thread is descheduled right after the commit
            super()._recovered(*args)

    st = Store(tmp_path)
    w = SlowAfterCommit(st)
    w.RETRY_MIN_S = w.RETRY_MAX_S = 3600.0
    broken = [True]

    def write(conn):
        if broken[0]:
            raise __import__("sqlite3").OperationalError("database is locked")

    w.submit(write)
    assert w.flush(30) is False and not w.writable
    broken[0] = False
    assert w.flush(30) and w.writable and w.settled(30)
    w.close()
