"""The per-process circuit breaker: closed → open on an outage → half-open probe → closed."""

from __future__ import annotations

import threading
import time
from typing import Any, Dict, Optional


class CircuitBreaker:
    """closed → open on an outage → half-open probe after a backoff → closed or open again."""

    def __init__(self, base_backoff: float = 1.0, max_backoff: float = 60.0) -> None:
        self.base = base_backoff
        self.max = max_backoff
        self.state = "closed"
        self.failures = 0
        self.retry_at = 0.0
        self.last_error = ""
        self._lock = threading.Lock()

    def allow(self) -> bool:
        """May a normal call go to the network now? (Never blocks.)"""
        return self.state == "closed"

    def probe_due(self, now: Optional[float] = None) -> bool:
        return self.state == "open" and (now or time.monotonic()) >= self.retry_at

    def record_success(self) -> None:
        with self._lock:
            self.state, self.failures, self.last_error = "closed", 0, ""

    def record_outage(self, error: str, retry_in: Optional[float] = None) -> None:
        """Open; probe again after the backoff, or after ``retry_in`` seconds (0: at once,
        for an outage another process saw: one short probe tells whether it still holds)."""
        with self._lock:
            self.failures += 1
            self.last_error = error
            backoff = min(self.max, self.base * (2 ** min(self.failures - 1, 10)))
            self.state = "open"
            self.retry_at = time.monotonic() + (backoff if retry_in is None else max(0.0, retry_in))

    def snapshot(self) -> Dict[str, Any]:
        left = max(0.0, self.retry_at - time.monotonic()) if self.state == "open" else 0.0
        return {"state": self.state, "failures": self.failures,
                "retry_in_s": round(left, 1), "last_error": self.last_error}
