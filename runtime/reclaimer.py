"""The retention reclaimer: archive and outbox rows older than the retention go, at most
once a day, measured on a clock a jumped wall clock cannot fool."""

from __future__ import annotations

import time
from typing import Callable, Dict, Optional

from ..common.peer_text import plugin_logger

log = plugin_logger("tencentdb_offload")


class Reclaimer:
    """Deletes archive and outbox data older than the retention, at most once a day.

    The wall clock can jump (an NTP step, a hand-set date, a VM restored from a snapshot): a
    jump of 31 days must not make everything just recorded look 31 days old. So "now" is the
    wall time at start plus the monotonic time since, rows this process wrote are never
    deleted, and a wall clock that drifted from the monotonic one is reported
    (``clock_warning``). The monotonic clock stops while a machine sleeps, so after a suspend
    the reclaimer deletes less, never more.
    """

    INTERVAL = 86_400.0
    CLOCK_SLACK_S = 600.0        # wall vs monotonic drift reported as a clock problem

    def __init__(self, reclaim: Callable[..., Dict[str, int]], retention_days: int, *,
                 wall: Callable[[], float] = time.time,
                 mono: Callable[[], float] = time.monotonic) -> None:
        self._reclaim = reclaim
        self.retention_days = retention_days
        self._wall, self._mono = wall, mono
        self.started_wall, self._started_mono = wall(), mono()
        self._last_mono: Optional[float] = None
        self.last_run = 0.0
        self.last_result: Dict[str, int] = {}
        self.last_error = ""
        self.clock_warning = ""

    def trusted_now(self) -> float:
        """The wall time at start plus the monotonic time since; notes a jumped wall clock."""
        elapsed = self._mono() - self._started_mono
        drift = (self._wall() - self.started_wall) - elapsed
        if abs(drift) > self.CLOCK_SLACK_S:
            self.clock_warning = (
                "the wall clock moved %s%.1f hours against the monotonic clock since start "
                "(a clock change or a suspend); retention uses the time at start plus the "
                "monotonic clock" % ("+" if drift > 0 else "-", abs(drift) / 3600.0))
        else:
            self.clock_warning = ""
        return self.started_wall + elapsed

    def due(self) -> bool:
        if self.retention_days <= 0:
            return False
        return self._last_mono is None or self._mono() - self._last_mono >= self.INTERVAL

    def run(self, now: Optional[float] = None) -> Dict[str, int]:
        self._last_mono = self._mono()
        self.last_run = now or self.trusted_now()
        try:
            # never what this process wrote: the cutoff is at most the time it started
            self.last_result = self._reclaim(self.retention_days, self.last_run,
                                             self.started_wall) or {}
            self.last_error = ""
            if self.last_result.get("outbox"):
                # delivered rows leave the outbox at once: these never reached the Gateway
                log.warning("tencentdb-offload: retention deleted %d outbox rows older than %d "
                            "days that the Gateway never received (it was unreachable or "
                            "refused them that long)", self.last_result["outbox"],
                            self.retention_days)
        except Exception as exc:
            self.last_error = "reclaim failed: %s" % exc
            self.last_result = {}
            log.warning("tencentdb-offload: %s", self.last_error, exc_info=True)
        return self.last_result

    def maybe_run(self) -> None:
        if self.due():
            self.run()
