"""The store writer: one background thread that commits queued store operations in batches.

``submit`` is what hooks call: it only puts on a queue (no SQLite on the caller's thread).
When the store cannot be written (disk full, another process holding the write lock, no
store at all) the writes stay in memory, in order, and are retried with backoff; while the
store is failing, what waits is capped (``MAX_WAITING_BYTES``) and anything over the cap is
counted as lost, reported in ``stats()`` and, once the store works again, in the store's
``writes_lost`` counter. A normal interpreter exit waits (bounded) for queued writes.
"""

from __future__ import annotations

import atexit
import queue
import sqlite3
import threading
import time
import weakref
from typing import Any, Callable, Dict, List, Optional, Tuple

from .repair import is_broken
from .store import Store
from ..common.peer_text import plugin_logger

log = plugin_logger("tencentdb_offload.store")

Op = Callable[[sqlite3.Connection], Any]
Group = Tuple[int, Tuple[Op, ...]]          # (bytes held, the operations of one submit)
_WAKE = (0, ())                             # retry now (flush); commits nothing


class StoreDamaged(Exception):
    """The store file is damaged and a recovery did not make it take the write: the store's
    problem, not the row's, so the write is held for a retry, never dropped."""


_STORE_PROBLEMS = (sqlite3.OperationalError, OSError, StoreDamaged)   # retry later


class StoreWriter:
    """Commits submitted operations in order; ``flush`` waits for what was submitted before."""

    IDLE_S = 60.0
    MAX_WAITING_BYTES = 64 << 20     # held in memory while the store is failing
    RETRY_MIN_S, RETRY_MAX_S = 0.5, 30.0
    # while writes are held a flush waits this long for the retry it asks for: a retry stuck
    # on another process's write lock takes the busy timeout (10 s), and a recall must not
    HELD_WAIT_S = 0.5
    EXIT_FLUSH_S = 10.0              # a normal exit waits at most this long for queued writes
    # A submit comes from a hook whose caller is still running: a host may run every hook on a
    # new thread and join it. Waking at once, this thread would take the GIL from that caller for
    # its whole CPU burst (JSON of a 100 KB result). Waiting briefly lets the caller finish
    # first, and batches what the same tool step submits (never while someone flushes).
    SETTLE_S = 0.002

    def __init__(self, store: Optional[Store], on_commit: Optional[Callable[[], None]] = None,
                 on_idle: Optional[Callable[[], None]] = None,
                 opener: Optional[Callable[[], Any]] = None, start: bool = True,
                 on_start: Optional[Callable[[], None]] = None) -> None:
        """``start=False``: the thread starts at the first submit (a forked child's writer is
        made between fork and exec, where no thread may be started); ``on_start`` runs first
        on that thread."""
        self.store = store
        self.on_start = on_start
        self.on_commit = on_commit
        self.on_idle = on_idle      # housekeeping (retention) runs here, off every hot path
        self.opener = opener        # retried while there is no store
        self.last_error = ""
        self.lost = 0               # writes given up: over the cap, or refused by SQLite
        self._refused = 0           # of those, refused by SQLite (a flush waiting saw them go)
        self._lost_unrecorded = 0
        self._queue: "queue.Queue[Any]" = queue.Queue()
        self._held: List[Group] = []       # failed on a store problem, oldest first
        self._held_bytes = 0
        self._queued_bytes = 0
        self._failures = 0          # consecutive failed attempts (0: the last one succeeded)
        self._fail_total = 0        # every failed attempt: a waiting flush sees one happen
        self.last_flush = ""
        self._retry_at = 0.0
        self._attempt_at = 0.0      # when the writes now being tried were taken
        self._submitted = 0
        self._done = 0
        self._cond = threading.Condition()
        self._flushers = 0          # callers waiting in flush (the writer does not settle then)
        self._stop = False
        self._thread = threading.Thread(target=self._run, name="tencentdb-offload-store",
                                        daemon=True)
        self._started = start
        if start:
            self._thread.start()
        _LIVE.add(self)

    # -- callers ------------------------------------------------------------------------
    def submit(self, *ops: Op) -> None:
        size = sum(getattr(op, "size", 0) for op in ops)
        with self._cond:
            if self._held and self._held_bytes + self._queued_bytes + size > self.MAX_WAITING_BYTES:
                self.lost += 1
                self._lost_unrecorded += 1
                return
            self._submitted += 1
            self._queued_bytes += size
            if not self._started:
                self._started = True
                self._thread.start()
        self._queue.put((size, ops))

    def flush(self, timeout: float = 5.0) -> bool:
        """Wait until everything submitted before is committed; False on timeout, False at
        once when a write attempt fails meanwhile (the writes are held for a retry: waiting
        longer would not write them), False after at most ``HELD_WAIT_S`` while writes are
        held, and False when one of them was refused and dropped. ``last_flush`` says which."""
        deadline = time.monotonic() + timeout
        with self._cond:
            target, failures, refused = self._submitted, self._fail_total, self._refused
            if self._done < target and self._failures:
                if not self._held and time.monotonic() - self._attempt_at > self.HELD_WAIT_S:
                    self.last_flush = "held for retry: %s" % self.last_error
                    return False                # a retry stuck on a lock: waiting cannot hurry it
                deadline = min(deadline, time.monotonic() + self.HELD_WAIT_S)
                if self._held:                  # not already retrying: retry now, not after backoff
                    self._retry_at = 0.0
                    self._queue.put(_WAKE)
            self._flushers += 1
            self._cond.notify_all()             # a caller waits: the writer stops settling
            try:
                while self._done < target:
                    left = deadline - time.monotonic()
                    if self._fail_total != failures:
                        self.last_flush = "held for retry: %s" % self.last_error
                        return False
                    if left <= 0 or not self._thread.is_alive():
                        self.last_flush = ("held for retry: %s" % self.last_error
                                           if self._failures else "timed out")
                        return False
                    self._cond.wait(left)
            finally:
                self._flushers -= 1
            if self._refused != refused:
                self.last_flush = self.last_error
                return False
        self.last_flush = "written"
        return True

    def settled(self, timeout: float = 0.5) -> bool:
        """Flush (bounded), then whether the store takes writes: what a caller promises the
        model can be read back only when this is True."""
        return self.flush(timeout) and self.writable

    def pending(self) -> int:
        with self._cond:
            return self._submitted - self._done

    @property
    def writable(self) -> bool:
        """True when the store exists, the last write attempt succeeded and nothing waits for
        a retry: what is submitted now is about to be in the archive. False from the first
        failed attempt until one succeeds (also while a retry is being tried)."""
        with self._cond:
            return self.store is not None and not self._held and self._failures == 0

    def stats(self) -> Dict[str, Any]:
        with self._cond:
            return {"healthy": self.writable, "writable": self.writable,
                    "pending": self._submitted - self._done,
                    "retrying": len(self._held),
                    "waiting_bytes": self._held_bytes + self._queued_bytes,
                    "lost": self.lost, "last_error": self.last_error,
                    "store_recoveries": list(getattr(self.store, "recoveries", []))}

    def close(self, timeout: float = 5.0) -> None:
        self.flush(timeout)
        self._queue.put(None)
        with self._cond:
            started = self._started
        if started:         # a forked child's writer that was never used has no thread
            self._thread.join(timeout)
        _LIVE.discard(self)

    def abandon(self) -> None:
        """In a forked child: this writer's thread and queue are the parent's (it commits
        them); the child neither writes nor waits for them at exit."""
        _LIVE.discard(self)

    # -- the thread ---------------------------------------------------------------------
    def _run(self) -> None:
        if self.on_start is not None:
            try:
                self.on_start()
            except Exception as exc:
                self.last_error = "start: %s" % exc
        if self.on_idle is not None:
            self._idle()
        while True:
            wait = self.IDLE_S if not self._held else max(0.0, self._retry_at - time.monotonic())
            try:
                first = self._queue.get(timeout=wait)
            except queue.Empty:
                if self._held:
                    self._commit([])
                else:
                    self._idle()
                continue
            if first is None:
                break
            if first[1]:
                self._settle_pause()
            batch, stop = self._drain(first)
            if self._held and time.monotonic() < self._retry_at:
                self._hold(batch)                       # keep order: behind what waits
            else:
                self._commit(batch)
            if stop:
                break

    def _settle_pause(self) -> None:
        """Wait ``SETTLE_S`` before committing, unless a caller is waiting in ``flush``."""
        with self._cond:
            if not self._flushers:
                self._cond.wait(self.SETTLE_S)

    def _drain(self, first: Group) -> Tuple[List[Group], bool]:
        batch = [first] if first[1] else []
        while len(batch) < 512:
            try:
                nxt = self._queue.get_nowait()
            except queue.Empty:
                return batch, False
            if nxt is None:
                return batch, True
            if nxt[1]:
                batch.append(nxt)
        return batch, False

    def _idle(self) -> None:
        if self.on_idle is None or self.store is None:
            return
        try:
            self.on_idle()
        except Exception as exc:
            self.last_error = "housekeeping failed: %s" % exc

    def _hold(self, groups: List[Group]) -> None:
        with self._cond:
            self._held.extend(groups)
            moved = sum(g[0] for g in groups)
            self._held_bytes += moved
            self._queued_bytes -= moved

    def _settle(self, groups: List[Group], lost: int = 0, written: bool = False) -> bool:
        """These groups are finished (committed, or given up and counted). ``written``: they
        reached the store, so it takes writes again — said under the same lock, or a flush
        woken here could read the store as unwritable a moment after it wrote. True when
        that ended a run of failed attempts."""
        with self._cond:
            recovered = written and self._failures > 0
            if written:
                self._failures = 0
            self._done += len(groups)
            self._queued_bytes -= sum(g[0] for g in groups)
            self.lost += lost
            self._refused += lost
            self._lost_unrecorded += lost
            self._cond.notify_all()
        return recovered

    def _commit(self, batch: List[Group]) -> None:
        with self._cond:
            groups, self._held = self._held + batch, []
            self._attempt_at = time.monotonic()
            self._queued_bytes += self._held_bytes
            self._held_bytes = 0
        if not groups:
            return
        if self.store is None and not self._open():
            self._failed(groups, "no store: %s" % self.last_error)
            return
        try:
            self._write([op for g in groups for op in g[1]])
        except _STORE_PROBLEMS as exc:
            self._failed(groups, "store write failed: %s" % exc)
            return
        except Exception:
            # one bad row must not lose the batch: commit each group alone
            recovered = False
            for i, g in enumerate(groups):
                try:
                    self._write(list(g[1]))
                except _STORE_PROBLEMS as exc:
                    self._failed(groups[i:], "store write failed: %s" % exc)
                    return
                except Exception as one:
                    self.last_error = "a write was refused and dropped: %s" % one
                    log.warning("tencentdb-offload: %s", self.last_error)
                    self._settle([g], lost=1)
                    continue
                recovered = self._settle([g], written=True) or recovered
            self._recovered(recovered)
            return
        self._recovered(self._settle(groups, written=True))

    def _write(self, ops: List[Op]) -> None:
        """One transaction, on the file the store opened: a store deleted, replaced or turned
        to garbage under us is recovered first (``Store.recover``) and the writes go to the
        recovered file, so nothing held in memory is lost to a file nobody will read."""
        check = getattr(self.store, "check", None)
        if check is not None:
            check()
        try:
            self.store.transaction(ops)
        except sqlite3.DatabaseError as exc:
            if not is_broken(exc):
                raise
            if check is None or not self.store.recover("the store failed: %s" % exc):
                raise StoreDamaged(exc) from exc
            try:
                self.store.transaction(ops)
            except sqlite3.DatabaseError as again:
                if is_broken(again):
                    raise StoreDamaged(again) from again
                raise

    def _failed(self, groups: List[Group], error: str) -> None:
        self._hold(groups)
        with self._cond:
            self._failures += 1
            self._fail_total += 1
            self._cond.notify_all()
        self._retry_at = time.monotonic() + min(self.RETRY_MAX_S,
                                                self.RETRY_MIN_S * 2 ** min(self._failures - 1, 8))
        self.last_error = "%s; %d write(s) wait in memory and are retried" % (error, len(self._held))
        if self._failures == 1 or self._failures % 10 == 0:
            log.warning("tencentdb-offload: %s", self.last_error)

    def _recovered(self, after_failures: bool) -> None:
        """After a commit: the failure that ended is no longer the last error; count the
        writes given up meanwhile; wake whoever waits for commits."""
        if after_failures:
            self.last_error = ""
        with self._cond:
            lost, self._lost_unrecorded = self._lost_unrecorded, 0
        if lost:
            try:
                self.store.transaction([lambda c: c.execute(
                    "INSERT INTO counters(name,value) VALUES('writes_lost',?) ON CONFLICT(name) "
                    "DO UPDATE SET value=value+excluded.value", (lost,))])
            except Exception:
                with self._cond:
                    self._lost_unrecorded += lost
        if self.on_commit is not None:
            try:
                self.on_commit()
            except Exception:  # the callback only wakes another thread
                pass

    def _open(self) -> bool:
        if self.opener is None:
            self.last_error = self.last_error or "the store could not be opened"
            return False
        try:
            self.store = self.opener()
        except Exception as exc:
            self.last_error = str(exc)
            return False
        return True


_LIVE: "weakref.WeakSet[StoreWriter]" = weakref.WeakSet()


def _flush_at_exit() -> None:
    """Runs before daemon threads stop: queued hook rows reach the disk (bounded wait)."""
    deadline = time.monotonic() + StoreWriter.EXIT_FLUSH_S
    for writer in list(_LIVE):
        if writer.flush(max(0.0, deadline - time.monotonic())):
            continue
        pending = writer.stats()["pending"]
        if pending:     # they were in memory only: say so rather than end in silence
            log.warning("tencentdb-offload: exiting with %d archive write(s) not saved (%s); "
                        "those results stay in Hermes' own session store only",
                        pending, writer.last_flush or writer.last_error)


atexit.register(_flush_at_exit)
