"""A store whose interior pages are damaged (bit rot, a torn write): the first write that meets
the damage recovers it once into a file that passes SQLite's check, writes are held (never
dropped) while the store cannot take them, and a flush never says "written" for a write that
was dropped."""

import random
import sqlite3
import time

from tencentdb_offload.archive import repair
from tencentdb_offload.archive.store import SCHEMA, ArchiveItem, Store
from tencentdb_offload.archive.writer import StoreWriter
from helpers import archive_items, count_archived


def _item(i, size=2000):
    return ArchiveItem("tool_result", ("old%d " % i) * (size // 5), "old%d" % i, "t")


def _damaged_store(tmp_path, rows=200):
    st = Store(tmp_path)
    for i in range(rows):
        archive_items(st, "s1", [_item(i)])
    st.close()
    with open(tmp_path / "store.db", "r+b") as f:
        f.seek(8192)
        f.write(random.Random(7).randbytes(8192))
    return Store(tmp_path)


def _broken_copies(tmp_path):
    return [p.name for p in tmp_path.iterdir() if p.name.startswith("store.db.broken-")
            and not p.name.endswith(("-wal", "-shm"))]


def _quick_check(path):
    conn = sqlite3.connect(str(path))
    try:
        return conn.execute("PRAGMA quick_check").fetchone()[0]
    finally:
        conn.close()


def test_damaged_pages_are_recovered_once_into_a_sound_store(tmp_path):
    st = _damaged_store(tmp_path)
    w = StoreWriter(st)
    for i in range(5):
        w.submit(Store.op_archive("s1", [ArchiveItem("tool_result", "new%d" % i, "new%d" % i)],
                                  time.time()))
        assert w.flush(10), w.last_flush
    assert w.stats()["lost"] == 0
    assert len(_broken_copies(tmp_path)) == 1               # one copy, not two per write
    assert _quick_check(tmp_path / "store.db") == "ok"
    assert st.read_page("s1", "new4")["content"] == "new4"
    assert count_archived(st, "s1") >= 5
    w.close()
    st.close()


def test_salvage_of_damaged_pages_copies_the_readable_rows_into_a_sound_file(tmp_path):
    st = _damaged_store(tmp_path)
    dest = tmp_path / "copy.db"
    saved = repair.salvage(st._anchor, dest, SCHEMA)
    assert saved > 0
    assert _quick_check(dest) == "ok"
    st.close()


def test_a_file_the_last_recovery_made_is_not_recovered_again(tmp_path):
    st = Store(tmp_path)
    archive_items(st, "s1", [_item(1)])
    assert st.recover("the store failed: database disk image is malformed")
    assert len(_broken_copies(tmp_path)) == 1
    assert not st.recover("the store failed: database disk image is malformed")
    assert len(_broken_copies(tmp_path)) == 1
    assert "damaged too" in st.last_error
    st.close()


class _DamagedStore:
    """A store whose every write meets a damaged page and whose recovery declines."""
    recoveries = []
    last_error = ""

    def check(self):
        return False

    def recover(self, reason):
        return False

    def transaction(self, ops):
        raise sqlite3.DatabaseError("database disk image is malformed")


def test_a_write_the_damaged_store_refuses_is_held_not_dropped():
    w = StoreWriter(_DamagedStore())
    w.RETRY_MIN_S = w.RETRY_MAX_S = 3600.0
    w.submit(lambda conn: None)
    assert w.flush(5) is False
    stats = w.stats()
    assert stats["lost"] == 0 and stats["retrying"] == 1 and "malformed" in stats["last_error"]
    w.abandon()


def test_a_flush_does_not_say_written_when_a_write_was_dropped(tmp_path):
    st = Store(tmp_path)
    w = StoreWriter(st)

    def bad(conn):
        raise ValueError("a row SQLite cannot take")

    w.submit(bad)
    assert w.flush(5) is False
    assert "dropped" in w.last_flush and w.stats()["lost"] == 1
    w.submit(Store.op_archive("s", [_item(1)], time.time()))
    assert w.flush(5) and w.last_flush == "written"
    w.close()
    st.close()
