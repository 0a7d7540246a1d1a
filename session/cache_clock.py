"""One conversation's provider responses: the pauses between them and what the provider's
cache reports taught about its TTL (whether the prompt cache has gone cold), and how much one
step of a turn adds to a request (whether the next step would pass the ceiling)."""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field
from typing import Any, Dict, Mapping, Optional

WARM_SHARE = 0.5       # a response reading at least this share from the cache: it was warm
LEARNED_CAP_S = 3_600.0   # the longest provider TTL on offer (1 h); a jumped clock teaches no more
MAX_TOKENS = 10_000_000   # no window is larger: a stored count above it is damage


def _seconds(raw: Any) -> float:
    """A stored time or duration: finite and non-negative, else 0 (the store is editable)."""
    if isinstance(raw, bool) or not isinstance(raw, (int, float)):
        return 0.0
    return float(raw) if math.isfinite(raw) and raw > 0 else 0.0


def _tokens(raw: Any) -> int:
    """A stored token count: a whole number up to the largest window on offer, else 0."""
    return int(_seconds(raw)) if _seconds(raw) <= MAX_TOKENS else 0


@dataclass
class CacheClock:
    """One conversation's pauses. ``last_wall`` crosses processes; inside one process the
    monotonic clock measures the pause, so a wall clock stepped mid-turn never makes a warm
    cache look cold. At most one idle compaction per pause (``spent``): a clock that jumps
    far forward costs one compaction, never a storm."""

    last_wall: float = 0.0              # wall time of the last provider response (any process)
    last_mono: Optional[float] = None   # the same on this process's monotonic clock
    spent: float = 0.0                  # the ``last_wall`` whose pause an idle compaction used
    warm_after: float = 0.0             # longest pause after which the provider read its cache
    compacted: bool = False             # a compaction since the last response (its rewrite)
    last_prompt: int = 0                # the provider's count of the request it answered (cached)
    this_turn: int = 0                  # the largest step of the turn under way (tokens added)
    last_turn: int = 0                  # the largest step of the last turn that had one
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def pause(self, wall: float, mono: float) -> Optional[float]:
        """Seconds since the last response; None when unknown or the clock went backwards."""
        if self.last_mono is not None:
            gap = mono - self.last_mono
        elif self.last_wall > 0:
            gap = wall - self.last_wall
        else:
            return None
        return gap if gap >= 0 else None

    def cold(self, ttl: float, wall: float, mono: float) -> bool:
        """The provider's cache has expired: a pause longer than the TTL (or than the longest
        pause after which the provider still reported a warm cache)."""
        if ttl <= 0:
            return False
        gap = self.pause(wall, mono)
        return gap is not None and gap > max(ttl, self.warm_after)

    def idle_due(self, ttl: float, wall: float, mono: float) -> bool:
        """Cold, and this pause has not had its idle compaction yet."""
        with self.lock:
            return self.cold(ttl, wall, mono) and self.spent != self.last_wall

    def untouched_since(self, stamp: float) -> bool:
        """No response since the one at ``stamp``, and its pause not used yet."""
        with self.lock:
            return self.last_wall == stamp and self.spent != stamp

    def spend(self) -> None:
        with self.lock:
            self.spent = self.last_wall

    def held(self, ttl: float, wall: float, mono: float) -> int:
        """Tokens the provider's cache holds for the conversation: the provider's count of its
        last request, or 0 when none was answered or the cache has gone cold since."""
        with self.lock:
            return 0 if self.cold(ttl, wall, mono) else self.last_prompt

    def compaction_landed(self) -> None:
        with self.lock:
            self.compacted = True

    def responded(self, prompt: int, usage: Mapping[str, Any], ttl: float,
                  wall: float, mono: float) -> bool:
        """A provider response arrived; learn from its cache report after a long pause.
        Returns True when it is the first response after a compaction (its cache write is
        that compaction's price)."""
        with self.lock:
            gap = self.pause(wall, mono)
            after_compaction, self.compacted = self.compacted, False
            if gap is not None and ttl > 0 and gap > ttl and not after_compaction:
                self._learn(gap, prompt, usage)
            self.last_wall, self.last_mono = wall, mono
            prompt = max(0, int(prompt))
            if 0 < self.last_prompt < prompt:
                self.this_turn = max(self.this_turn, prompt - self.last_prompt)
            self.last_prompt = prompt
            return after_compaction

    def turn_started(self) -> None:
        """A turn starts (the host's preflight): the steps seen so far were the last turn's."""
        with self.lock:
            if self.this_turn:
                self.last_turn, self.this_turn = self.this_turn, 0

    def step_growth(self) -> int:
        """What one step of the coming turn may add: the largest of the last turn's steps
        (0: none seen yet)."""
        with self.lock:
            return self.last_turn or self.this_turn

    def _learn(self, gap: float, prompt: int, usage: Mapping[str, Any]) -> None:
        read, write = usage.get("cache_read_tokens"), usage.get("cache_write_tokens")
        read = read if isinstance(read, int) and read > 0 else 0
        write = write if isinstance(write, int) and write > 0 else 0
        if not (read or write) or prompt <= 0:
            return                      # the host or provider reports no cache: the setting decides
        if read >= WARM_SHARE * prompt:
            self.warm_after = max(self.warm_after, min(gap, LEARNED_CAP_S))
        elif gap <= self.warm_after:
            self.warm_after = 0.0       # cold after a pause we thought warm: back to the setting

    def export(self) -> Dict[str, float]:
        with self.lock:
            return {"at": self.last_wall, "spent": self.spent, "warm_after": self.warm_after,
                    "last_prompt": self.last_prompt, "this_turn": self.this_turn,
                    "last_turn": self.last_turn}

    def seed(self, raw: Any) -> None:
        """What an earlier process left (each value checked); never overrides this process's."""
        if not isinstance(raw, Mapping):
            return
        with self.lock:
            if self.last_mono is None and not self.last_wall:
                self.last_wall = _seconds(raw.get("at"))
                self.spent = _seconds(raw.get("spent"))
                self.warm_after = min(LEARNED_CAP_S, _seconds(raw.get("warm_after")))
                self.last_prompt, self.this_turn, self.last_turn = (
                    _tokens(raw.get(k)) for k in ("last_prompt", "this_turn", "last_turn"))

    def snapshot(self, ttl: float, wall: float, mono: float) -> Dict[str, Any]:
        gap = self.pause(wall, mono)
        return {"seconds_since_last_response": None if gap is None else round(gap, 1),
                "cold": self.cold(ttl, wall, mono),
                "warm_reported_after_s": round(self.warm_after, 1)}
