"""A table of the most recently used entries whose entries in use are never pushed out.

The session registry keeps the newest conversations. A compaction works on one for seconds
while others come and go: pushed out meanwhile, the next hook would build a second state for
the same conversation, and the compaction's result would land on the first, which nobody reads.
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from typing import Callable, Generic, List, Optional, Tuple, TypeVar

V = TypeVar("V")


class HeldLRU(Generic[V]):
    """At most ``limit`` entries, least recently used out first, except those held (the table
    may then hold more until they are released). Not thread-safe: its owner locks."""

    def __init__(self, limit: int) -> None:
        self.limit = max(1, limit)
        self.evictions = 0
        self._entries: "OrderedDict[str, V]" = OrderedDict()
        self._held: "Counter[str]" = Counter()

    def use(self, key: str, make: Callable[[], V], hold: bool = False) -> Tuple[V, bool]:
        """``key``'s entry (made when missing: then True), now the most recently used; with
        ``hold``, kept until as many ``release`` calls."""
        value = self._entries.get(key)
        made = value is None
        if value is None:
            value = self._entries[key] = make()
        else:
            self._entries.move_to_end(key)
        if hold:
            self._held[key] += 1
        self._evict(keep=key)
        return value, made

    def release(self, key: str) -> None:
        self._held -= Counter({key: 1})         # (a key at 0 is dropped)
        self._evict()

    def peek(self, key: str) -> Optional[V]:
        return self._entries.get(key)

    def values(self) -> List[V]:
        return list(self._entries.values())

    def __len__(self) -> int:
        return len(self._entries)

    def _evict(self, keep: str = "") -> None:
        over = len(self._entries) - self.limit
        gone: List[str] = []
        for key in self._entries:               # oldest first; stops once enough are found
            if len(gone) >= over:
                break
            if key != keep and not self._held[key]:
                gone.append(key)
        for key in gone:
            del self._entries[key]
        self.evictions += len(gone)
