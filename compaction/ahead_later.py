"""Gateway compactions prepared during a user's pause, for the idle compaction that follows.

A turn start after a pause longer than the provider's cache TTL compacts (``idle.py``) and must
not wait for a ``/compact`` that takes seconds. In a process that outlives the turn (the
messaging gateway), the pause is idle time: at a turn's end the conversation is booked here,
and once most of the TTL has passed with no newer response, its compaction is prepared
(``PreparedCompactions.start``), so the turn that ends the pause finds it ready. One thread serves
every conversation (started when something is booked, gone when nothing is); a conversation
holds at most one booking, the newest; at most ``most`` are held (the oldest go first).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from typing import Any, Callable, Tuple

Booking = Tuple[float, Tuple[Any, ...], Callable[[], bool]]    # (due, start's arguments, still wanted)
IDLE_EXIT_S = 30.0      # the thread ends after this long with nothing booked


class PauseBookings:
    """Preparations booked for after a pause: each started when due, if still wanted then."""

    def __init__(self, start: Callable[..., bool], most: int,
                 on_error: Callable[[str], None] = lambda _what: None) -> None:
        self._start = start
        self._on_error = on_error       # in an except block: the error is said once
        self._most = max(1, most)
        self._booked: "OrderedDict[str, Booking]" = OrderedDict()
        self._cond = threading.Condition()
        self._thread = None
        self._closed = False
        self.fired = 0          # preparations started after a pause

    @property
    def waiting(self) -> int:
        with self._cond:
            return len(self._booked)

    def book(self, key: str, delay_s: float, args: Tuple[Any, ...],
             still_wanted: Callable[[], bool]) -> None:
        """Prepare with ``args`` in ``delay_s`` seconds if ``still_wanted()`` says so then."""
        with self._cond:
            if self._closed:
                return
            self._booked.pop(key, None)
            self._booked[key] = (time.monotonic() + max(0.0, delay_s), args, still_wanted)
            while len(self._booked) > self._most:
                self._booked.popitem(last=False)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="tdo-compact-after-pause",
                                                daemon=True)
                self._thread.start()
            self._cond.notify()

    def cancel(self, key: str) -> None:
        with self._cond:
            self._booked.pop(key, None)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._booked.clear()
            self._cond.notify()

    def _due(self) -> Any:
        """The next booking that is due, waiting for it; None when the thread should end."""
        with self._cond:
            idle_since = time.monotonic()
            while not self._closed:
                now = time.monotonic()
                if not self._booked:
                    if now - idle_since >= IDLE_EXIT_S:
                        self._thread = None
                        return None
                    self._cond.wait(IDLE_EXIT_S - (now - idle_since))
                    continue
                key, (due, args, wanted) = min(self._booked.items(), key=lambda kv: kv[1][0])
                if due <= now:
                    del self._booked[key]
                    return args, wanted
                self._cond.wait(due - now)
            return None

    def _run(self) -> None:
        for args, wanted in iter(self._due, None):
            try:
                if wanted() and self._start(*args):
                    with self._cond:
                        self.fired += 1
            except Exception:       # a failure of ours: said, never kills the thread
                self._on_error("a compaction booked for after a pause failed to start")
