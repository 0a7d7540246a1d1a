"""Named counts bumped from many threads at once (hook threads, engines, the sender)."""

from __future__ import annotations

import threading
from typing import Dict


class Tally:
    """A counter whose ``add`` never loses an update (``c[k] += 1`` on a dict does when two
    threads interleave between the read and the write)."""

    def __init__(self) -> None:
        self._counts: Dict[str, int] = {}
        self._lock = threading.Lock()

    def forked_copy(self) -> "Tally":
        """The counts so far under a new lock: in a forked child the old lock may be held
        for good by a parent thread that does not exist there (read without it: the child
        has one thread)."""
        copy = Tally()
        copy._counts = dict(self._counts)
        return copy

    def add(self, name: str, n: int = 1) -> None:
        with self._lock:
            self._counts[name] = self._counts.get(name, 0) + n

    def __getitem__(self, name: str) -> int:
        return self._counts.get(name, 0)

    def as_dict(self) -> Dict[str, int]:
        with self._lock:
            return dict(self._counts)
