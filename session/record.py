"""One compaction as a typed record, and the one way every surface describes it.

The engine builds a ``Compaction`` when a compaction lands; session stats, the events table,
``/tencentdb-offload``, ``python3 <plugin dir> status``, the host's start-of-compaction line, the
demo and replay all read this record and render it through ``describe()``, so one compaction
reads the same everywhere. Its sizes are *estimated*: provider tokens by our estimate
calibrated to the provider's own counts (``SIZES``); every surface that shows them says so,
and says which other figures are the provider's own count of a request (``token_counts``).
"""

from __future__ import annotations

import enum
import math
from dataclasses import asdict, dataclass
from typing import Any, Dict, Mapping, Optional, Tuple

from ..common import cache_model
from ..common.humanize import count, plural, printable


class Route(str, enum.Enum):
    """Which path produced the result."""
    GATEWAY = "gateway"                   # the Gateway's reply, within the budget as it came
    GATEWAY_THEN_LOCAL = "gateway+local"  # the Gateway's reply, finished locally to the budget
    LOCAL = "local"                       # local compaction only (no Gateway, or it failed)

    @property
    def request_only(self) -> bool:
        return self.reason == "request"

    @property
    def via_gateway(self) -> bool:
        return self is not Route.LOCAL


class Level(str, enum.Enum):
    """The Gateway's ``resolvedLevel`` (cumulative: each includes the ones before), or local."""
    FASTPATH = "fastpath"
    REPLAY = "replay"                     # only the fast path worked: earlier decisions replayed
    MILD = "mild"
    AGGRESSIVE = "aggressive"
    EMERGENCY = "emergency"
    LOCAL = "local"
    UNKNOWN = "unknown"                   # a level this version does not know (never shown raw)

    @classmethod
    def parse(cls, raw: Any) -> "Level":
        try:
            return cls(str(raw or "").strip().lower())
        except ValueError:
            return cls.UNKNOWN


WHEN = {"idle": " at a turn start after a pause (prompt cache cold)",
        "ceiling": " at a turn start, before a step that would pass 90% of the window (or the trigger)",
        "request": " for one request only (the host had not compacted in time)"}
# "adopted": the host's transcript compaction that took the bytes of the request cut before it
# (``request_cut``): one saving and one set of departures, counted with that cut, not again
REASONS = {r: r for r in ("threshold", "idle", "ceiling", "manual", "request", "adopted")}   # an unknown one reads as threshold


# what a compaction's sizes are, said once on every surface that shows them (issue 53: "74,885 →
# 25,015 tokens" in a 64,000-token window read as a request over the window)
SIZES = ("compaction sizes are estimated: the whole context when the compaction ran, tool "
         "results not sent yet included, by the plugin's count calibrated to the provider's (or "
         "Hermes' own figure when higher), so \"before\" can exceed any request sent, even the "
         "window; request sizes are the provider's own count (prompt_tokens)")
ESTIMATED, PROVIDER = "estimated", "provider"


def token_counts(estimated: Any, provider: Any = (), priced: Any = ()) -> Dict[str, Any]:
    """Which count each token figure of a ``--json`` output is (field paths as listed), and
    which figures are prices under the cache model."""
    return {ESTIMATED: {"fields": list(estimated), "means": "the plugin's estimate: " + SIZES},
            PROVIDER: {"fields": list(provider), "means": "the provider's own count of a "
                       "request (prompt_tokens, cache tokens), as Hermes passed it on"},
            "cache_model": {"fields": list(priced), "means": cache_model.UNITS}}


def _ratio(raw: Any) -> float:
    """A share of the window from a stored row: inside (0, 1), else 0."""
    value = _num(raw)
    return value if value < 1.0 else 0.0


def _num(raw: Any) -> float:
    """A count from a stored row: finite and non-negative, else 0 (rows may be old or odd)."""
    try:
        value = float(raw)
    except (TypeError, ValueError):
        return 0.0
    return value if math.isfinite(value) and value > 0 else 0.0


def _int(raw: Any) -> int:
    return int(_num(raw))


def _recorded(raw: Any) -> int:
    """A count an older record may lack (-1 then, or for a value that is not a count)."""
    return _int(raw) if isinstance(raw, (int, float)) and not isinstance(raw, bool) and raw >= 0 else -1


MAX_LEFT = 200              # keys of what left kept in a record (``archived`` has the total)
MAX_KEY = 256               # chars of one key (a tool_call_id or msg-...)


def _keys(raw: Any) -> Tuple[str, ...]:
    """The read-back keys of a stored row: strings only, bounded (the store is editable)."""
    if not isinstance(raw, (list, tuple)):
        return ()
    return tuple(printable(k, MAX_KEY, newlines=False) for k in raw[:MAX_LEFT]
                 if isinstance(k, str) and k)


@dataclass(frozen=True)
class Compaction:
    route: Route
    level: Level
    tokens_before: int          # provider tokens of the request before (ours, calibrated)
    tokens_after: int           # provider tokens of the request after (ours, calibrated)
    target: int                 # the budget it had to land at or under
    archived: int               # items (messages and tool results) moved to the archive
    context_length: int = 0
    canvas_removed: int = 0     # stale canvas blocks dropped on the way
    error: str = ""             # why the Gateway was not used or not enough ("" if it was)
    at: float = 0.0             # wall-clock time it landed
    ms: float = 0.0             # how long compress() took
    trigger: int = 0            # where compaction started on this window (0: an older record)
    left: Tuple[str, ...] = ()  # keys to read back what left (tdai_read_cos), at most MAX_LEFT
    model_ratio: float = 0.0    # the compression.model_thresholds value of the trigger (0: none)
    reason: str = "threshold"   # what started it: threshold | idle (a cold cache) | ceiling
    #                             (a turn start before a step that would pass it) | manual |
    #                             request (one request cut, the host's transcript as it was) |
    #                             adopted (the transcript took that cut: nothing new left)
    prefix_kept: int = -1       # estimated tokens at the request's start it left as they were
    #                             (system prompt, tool schemas, first messages); -1: not recorded
    cached_before: int = 0      # the provider's count of the last request, when the cache held
    #                             it then (0: none sent, or cold after a pause over the TTL)

    @property
    def idle(self) -> bool:
        return self.reason == "idle"

    @property
    def request_only(self) -> bool:
        return self.reason == "request"

    @property
    def adopted(self) -> bool:
        return self.reason == "adopted"

    @property
    def counted(self) -> int:
        """1 for a compaction, 0 for a transcript's taking of a cut counted already."""
        return 0 if self.adopted else 1

    @property
    def via_gateway(self) -> bool:
        return self.route.via_gateway

    @property
    def saved(self) -> int:
        """Tokens this record saved (an adopted cut's were counted with the cut)."""
        return max(0, self.tokens_before - self.tokens_after) * self.counted

    def cache_break(self) -> Optional[Dict[str, Any]]:
        """What it cost the provider's prompt cache, under the cache model (``cache_model``),
        for the first request after it (later ones are not counted): the cached tokens past
        the kept prefix it threw away, the tokens that request writes, and its price; beside
        them the same with no compaction, where the context before fitted the window. None
        for a record that predates the figures, or one counted with an earlier (adopted)."""
        if self.prefix_kept < 0 or not self.counted:
            return None
        read = min(self.prefix_kept, self.cached_before, self.tokens_after)
        fits = 0 < self.tokens_before <= self.context_length
        held = min(self.cached_before, self.tokens_before)
        return {"prefix_kept": self.prefix_kept, "cached_before": self.cached_before,
                "invalidated": max(0, self.cached_before - read),
                "written": self.tokens_after - read,
                "cost": round(cache_model.cost(self.tokens_after, read), 1),
                "written_without": self.tokens_before - held if fits else None,
                "cost_without": round(cache_model.cost(self.tokens_before, held), 1) if fits else None}

    def describe(self) -> str:
        """"compacted through the Gateway (mild): 118,020 → 52,311 tokens (estimated; target 64,000), 14 items
        archived" — the one rendering every surface uses."""
        if self.adopted:
            return ("the host's transcript took the cut made for one request: %s → %s tokens "
                    "(estimated; saved and archived with that cut, counted there once)"
                    % (count(self.tokens_before), count(self.tokens_after)))
        how = ("through the Gateway (%s)" % self.level.value if self.route is Route.GATEWAY else
               "through the Gateway (%s), finished locally" % self.level.value
               if self.route is Route.GATEWAY_THEN_LOCAL else "locally")
        # 0.1.0 recorded no target: a "(target 0)" would read as a compaction to nothing
        target = " (%s; target %s)" % (ESTIMATED, count(self.target)) if self.target else \
            " (%s)" % ESTIMATED
        line = "compacted %s%s: %s → %s tokens%s, %s archived" % (
            how, WHEN.get(self.reason, ""), count(self.tokens_before), count(self.tokens_after), target,
            plural(self.archived, "item"))
        return line + ("; Gateway: %s" % printable(self.error, 160, newlines=False)
                       if self.error else "")

    def to_json(self) -> Dict[str, Any]:
        out = asdict(self)
        out["route"], out["level"] = self.route.value, self.level.value
        out["left"] = list(self.left)
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Compaction":
        """From an events-table row, this version's or an older one's (``path`` for route,
        no ``target``); whatever a row holds, a record comes back."""
        data = data if isinstance(data, Mapping) else {}
        raw_route = str(data.get("route", data.get("path", "local")) or "local")
        route = (Route.GATEWAY_THEN_LOCAL if raw_route.startswith("gateway+") else
                 Route.GATEWAY if raw_route.startswith("gateway") else Route.LOCAL)
        level = Level.parse(data.get("level")) if route.via_gateway else Level.LOCAL
        return cls(route=route, level=level,
                   tokens_before=_int(data.get("tokens_before")),
                   tokens_after=_int(data.get("tokens_after")),
                   target=_int(data.get("target")), archived=_int(data.get("archived")),
                   context_length=_int(data.get("context_length")),
                   canvas_removed=_int(data.get("canvas_removed")),
                   error=printable(data.get("error") or "", 500),
                   at=_num(data.get("at")), ms=_num(data.get("ms")), trigger=_int(data.get("trigger")),
                   left=_keys(data.get("left")), model_ratio=_ratio(data.get("model_ratio")),
                   reason=REASONS.get(str(data.get("reason") or ""), "threshold"),
                   prefix_kept=_recorded(data.get("prefix_kept")),
                   cached_before=_int(data.get("cached_before")))
