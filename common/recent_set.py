"""A set that keeps only its most recently added members (bounded memory, thread-safe)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Hashable


class RecentSet:
    """Membership for the last ``limit`` members added; older ones are forgotten first."""

    def __init__(self, limit: int) -> None:
        self.limit = max(1, limit)
        self._members: "OrderedDict[Hashable, None]" = OrderedDict()
        self._lock = threading.Lock()

    def add(self, item: Hashable) -> None:
        with self._lock:
            self._members[item] = None
            self._members.move_to_end(item)
            while len(self._members) > self.limit:
                self._members.popitem(last=False)

    def discard(self, item: Hashable) -> None:
        with self._lock:
            self._members.pop(item, None)

    def __contains__(self, item: Hashable) -> bool:
        return item in self._members

    def __len__(self) -> int:
        return len(self._members)
