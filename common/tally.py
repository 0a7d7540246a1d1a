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

    def add(self, name: str, n: int = 1) -> None:
        with self._lock:
            self._counts[name] = self._counts.get(name, 0) + n

    def __getitem__(self, name: str) -> int:
        return self._counts.get(name, 0)

    def as_dict(self) -> Dict[str, int]:
        with self._lock:
            return dict(self._counts)
