"""One resource per thread (a SQLite connection, a kept-alive socket), closed only where safe.

Hermes runs engines and tools on many threads (its compression and hook pools, the messaging
gateway's per-request agents). A plain ``threading.local`` cannot be closed from outside, and a list of every
resource ever opened keeps those of finished threads open forever. This keeps one per live
thread and closes a resource only on its owner thread or after the owner has ended: closing a
SQLite connection or a socket under a thread that is using it breaks that thread's transaction
or read. ``close_all`` closes what it may at once and retires the rest: a retired resource is
never handed out again, and its owner closes it at its next call (or anyone does, once the
owner has ended).
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Dict, Generic, List, Optional, Tuple, TypeVar

T = TypeVar("T")
Entry = Tuple[threading.Thread, Any]


def _ended(owner: threading.Thread) -> bool:
    """The owner can never touch its resource again. The main thread counts as running until
    the interpreter is gone: during exit hooks its ``is_alive()`` is already False while it
    still runs them (and may still use its connection)."""
    return owner is not threading.main_thread() and not owner.is_alive()


class PerThread(Generic[T]):
    def __init__(self, close: Callable[[T], Any]) -> None:
        self._close = close
        self._lock = threading.Lock()
        self._items: Dict[int, Entry] = {}
        self._retired: List[Entry] = []     # owner still running at close_all

    def get(self) -> Optional[T]:
        me = threading.current_thread()
        entry = self._items.get(me.ident or 0)
        if entry is not None and entry[0] is me:
            return entry[1]
        if self._retired:
            with self._lock:
                closable = self._take_closable(me)
            self._close_each(closable)
        return None

    def put(self, item: T) -> T:
        """This thread's resource from now on; what it replaces and what ended threads left
        are closed."""
        me = threading.current_thread()
        with self._lock:
            old = self._items.get(me.ident or 0)
            # an ident is reused only after its thread ended: an entry under ours is closable
            replaced = [old[1]] if old is not None and old[1] is not item else []
            self._items[me.ident or 0] = (me, item)
            stale = self._take_closable(me)
        self._close_each(replaced + stale)
        return item

    def drop(self) -> None:
        """Close and forget this thread's resource (after an error)."""
        with self._lock:
            entry = self._items.pop(threading.get_ident(), None)
        if entry is not None:
            self._close_each([entry[1]])

    def close_all(self) -> None:
        """Close this thread's resource and those of ended threads; retire the others (never
        handed out again, closed by their owner's next call or after it ended)."""
        me = threading.current_thread()
        with self._lock:
            self._retired += self._items.values()
            self._items = {}
            closable = self._take_closable(me)
        self._close_each(closable)

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    def _take_closable(self, me: threading.Thread) -> List[Any]:
        """Remove and return (lock held) the resources ``me`` may close: its own retired ones
        and every one whose owner has ended."""
        ok = lambda owner: owner is me or _ended(owner)  # noqa: E731
        gone = [k for k, (owner, _item) in self._items.items() if owner is not me and _ended(owner)]
        out = [self._items.pop(k)[1] for k in gone]
        out += [item for owner, item in self._retired if ok(owner)]
        self._retired = [(owner, item) for owner, item in self._retired if not ok(owner)]
        return out

    def _close_each(self, items: List[Any]) -> None:
        for item in items:
            try:
                self._close(item)
            except Exception:   # closing is best effort: the peer or file may be gone already
                pass
