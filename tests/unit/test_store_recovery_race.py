"""A store recovery is atomic to readers on other threads (issue 51 item 11).

``recover()`` moves the broken file aside and puts the restored copy in its place. A reader on
another thread that opened a connection in between used to pass the check (the identity was
cleared for the swap), create an empty ``store.db`` of its own (recall: "no such table"), and
closing that connection later deleted ``store.db-wal`` by name: the new file's WAL, with what
was archived since. The swap is held at the exact point between its two steps here.
"""

import sqlite3
import threading

from tencentdb_offload.archive import repair
from tencentdb_offload.archive.store import ArchiveItem, Store
from helpers import archive_items


class WatchedLock:
    """The store's recovery lock; ``on_wait`` runs when a thread must wait for its holder."""

    def __init__(self, lock, on_wait):
        self._lock, self._on_wait = lock, on_wait

    def __enter__(self):
        if not self._lock.acquire(blocking=False):
            self._on_wait()
            self._lock.acquire()
        return self

    def __exit__(self, *exc):
        self._lock.release()


def _item(call_id, text):
    return [ArchiveItem("tool_result", text, tool_call_id=call_id, tool_name="cat", role="tool")]


def _in_thread(fn, name, settled=None):
    out = []

    def run():
        try:
            out.append(fn())
        except Exception as exc:        # what the reader would have seen
            out.append(exc)
        finally:
            if settled is not None:
                settled.set()
    t = threading.Thread(target=run, name=name)
    t.start()
    return t, out


def test_a_reader_during_a_recovery_reads_the_restored_store(tmp_path, monkeypatch):
    store = Store(tmp_path)
    archive_items(store, "conv", _item("c1", "archived before the damage"))
    swapped_half, go_on = threading.Event(), threading.Event()
    real_quarantine = repair.quarantine

    def quarantine_then_pause(*args, **kwargs):     # the broken file is aside, the copy not in
        aside = real_quarantine(*args, **kwargs)
        if threading.current_thread().name == "recovery":
            swapped_half.set()
            go_on.wait()
        return aside
    monkeypatch.setattr(repair, "quarantine", quarantine_then_pause)
    settled = threading.Event()     # the reader finished, or waits for the recovery
    store._repairing = WatchedLock(store._repairing, settled.set)

    recovery, _ = _in_thread(lambda: store.recover("the store failed: test"), "recovery")
    assert swapped_half.wait(30)
    reader, read = _in_thread(lambda: store.read_page("conv", "c1"), "reader", settled)
    assert settled.wait(30)
    go_on.set()
    recovery.join(30)
    reader.join(30)
    assert not isinstance(read[0], Exception), read[0]
    assert read[0] and read[0]["content"] == "archived before the damage"

    # what is archived after the recovery stays, whoever closes an old connection later
    archive_items(store, "conv", _item("c2", "archived after the recovery"))
    later, again = _in_thread(lambda: store.read_page("conv", "c2"), "later reader")
    later.join(30)
    assert again[0] and again[0]["content"] == "archived after the recovery"
    assert not store.check(), store.recoveries         # its WAL is still the one it opened
    assert len(store.recoveries) == 1
    other = sqlite3.connect(str(store.path))            # another process sees both
    try:
        assert other.execute("SELECT count(*) FROM archive").fetchone()[0] == 2
    finally:
        other.close()
        store.close()


def test_a_reader_never_creates_the_store_file(tmp_path):
    store = Store(tmp_path)
    store.close()                   # no longer watching its file: nothing recovers it
    store.path.unlink()
    reader, read = _in_thread(lambda: store.search("conv", "anything"), "reader")
    reader.join(30)
    assert isinstance(read[0], sqlite3.Error)
    assert not store.path.exists()
