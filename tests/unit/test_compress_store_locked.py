"""Another process holding the store's write lock: a compaction waits for its archive once,
not once per flush. Its writes go on disk when the lock is released (nothing lost)."""

import sqlite3
import time

from tencentdb_offload.compaction import flow
from tencentdb_offload.context import messages

from helpers import conversation, count_archived, make_engine, wait_for

WAIT_S = 4.0        # the archive wait a compaction allows (the module's, made longer)


def test_a_compaction_waits_for_a_locked_store_once(tmp_path, monkeypatch):
    monkeypatch.setattr(flow, "ARCHIVE_BEFORE_RETURN_S", WAIT_S)
    rt, eng = make_engine(tmp_path, session="A")
    conv = [{"role": "system", "content": "sys"}] + conversation(30, 6000)
    assert rt.flush_writes(10)
    other = sqlite3.connect(str(rt.store.path), isolation_level=None, timeout=1)
    try:
        other.execute("BEGIN IMMEDIATE")       # another process writes (the busy wait is 10 s)
        started = time.monotonic()
        out = eng.compress(list(conv), current_tokens=60_000)
        took = time.monotonic() - started
        assert out != conv and messages.validation_errors(out) == []
        # the archive flush, then the check of what the archive holds: they share one wait
        # (each waited it in full: at least 2 x WAIT_S)
        assert took < WAIT_S + 3.0, "compress waited %.1f s for the archive" % took
    finally:
        other.execute("ROLLBACK")
        other.close()
    try:
        assert wait_for(lambda: rt.flush_writes(1), 60)
        assert count_archived(rt.store, "A") > 0
    finally:
        rt.close()
