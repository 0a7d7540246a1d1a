"""One resource per thread (a SQLite connection, a kept-alive socket), all closable at once.

Hermes runs engines and tools on many threads (0.22's pools, the messaging gateway's per-request
agents). A plain ``threading.local`` cannot be closed from outside, and a list of every
resource ever opened keeps those of finished threads open forever. This keeps one per live
thread, closes a finished thread's resource when the next one is opened, and closes all on
``close_all``.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Dict, Generic, Optional, Tuple, TypeVar

T = TypeVar("T")


class PerThread(Generic[T]):
    def __init__(self, close: Callable[[T], Any]) -> None:
        self._close = close
        self._lock = threading.Lock()
        self._items: Dict[int, Tuple[threading.Thread, T]] = {}

    def get(self) -> Optional[T]:
        entry = self._items.get(threading.get_ident())
        return entry[1] if entry is not None and entry[0] is threading.current_thread() else None

    def put(self, item: T) -> T:
        """This thread's resource from now on; resources of finished threads are closed."""
        me = threading.current_thread()
        with self._lock:
            gone = [k for k, (thread, _item) in self._items.items() if not thread.is_alive()]
            stale = [self._items.pop(k)[1] for k in gone]
            old = self._items.get(me.ident or 0)
            self._items[me.ident or 0] = (me, item)
        for res in stale + ([old[1]] if old is not None and old[1] is not item else []):
            self._quiet_close(res)
        return item

    def drop(self) -> None:
        """Close and forget this thread's resource (after an error)."""
        with self._lock:
            entry = self._items.pop(threading.get_ident(), None)
        if entry is not None:
            self._quiet_close(entry[1])

    def close_all(self) -> None:
        with self._lock:
            items, self._items = list(self._items.values()), {}
        for _thread, item in items:
            self._quiet_close(item)

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    def _quiet_close(self, item: T) -> None:
        try:
            self._close(item)
        except Exception:       # closing is best effort: the peer or file may be gone already
            pass
