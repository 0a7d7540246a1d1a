"""Where compaction triggers: Hermes' ``compression.model_thresholds``, matched the way the host
matches them, and the host's own floor on small windows.

0.22 sets the table on the engine before ``update_model``. For a model it names, its value
wins over ours: the longest matching substring, a ``provider:``-scoped key before a bare one of
the same length (the host's rule, so one table means the same under both engines). A value at
or below our landing ratio is ignored: every compaction would trigger the next.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional, Tuple

if TYPE_CHECKING:
    from ..settings.config import Settings

HOST_MINIMUM_CONTEXT = 64_000   # Hermes' MINIMUM_CONTEXT_LENGTH: no window is smaller
SMALL_WINDOW_RATIO = 0.85       # where the built-in triggers when that floor binds
FLOOR_SINCE = (0, 22)           # the first Hermes with the floor rule the engine follows


def _rank(key: str, model: str, provider: str) -> Optional[Tuple[int, int]]:
    scope, sep, part = key.partition(":")
    if sep:
        return (len(part), 1) if scope.strip().lower() == provider and part in model else None
    return (len(key), 0) if key in model else None


def small_window_trigger(context_length: int, trigger: int) -> int:
    """Never earlier than the built-in on a window its 64K floor binds (64K-85K, 0.85 of the
    window at 64K): there 0.75 leaves less than one tool-heavy turn between the landing and the
    next compaction, and one compaction more is one cache break more (0.22 CLI, 9 turns: 4
    compactions where the built-in made 3, at the same cost)."""
    if context_length < HOST_MINIMUM_CONTEXT:
        return trigger
    return max(trigger, min(HOST_MINIMUM_CONTEXT, int(context_length * SMALL_WINDOW_RATIO)))


@dataclass(frozen=True)
class Trigger:
    """Where compaction starts on one window: tokens, and why when not the configured ratio."""
    tokens: int
    window: int
    why: str = ""

    @property
    def ratio(self) -> float:
        return self.tokens / self.window if self.window else 0.0

    def describe(self) -> str:
        """``85% of the 64,000-token window = 54,400 tokens (Hermes 0.22's small-window floor)``"""
        return "%.0f%% of the %s-token window = %s tokens%s" % (
            self.ratio * 100, format(self.window, ","), format(self.tokens, ","),
            " (%s)" % self.why if self.why else "")


def applying_trigger(settings: "Settings", window: int, *, host_floor: bool,
                     model_ratio: Optional[float] = None) -> Trigger:
    """The trigger that applies on ``window``: a ``compression.model_thresholds`` value
    (``model_ratio``) or the configured threshold, the cap when it is lower, and on a host with
    the 64K floor (``host_floor``: Hermes 0.22 outside its messaging gateway, see
    ``host_has_floor``) never earlier than the built-in unless the user chose the threshold."""
    tokens = settings.trigger_tokens(window, model_ratio)
    why = "compression.model_thresholds" if model_ratio is not None else ""
    if settings.max_context_tokens and tokens == settings.max_context_tokens:
        why = "TENCENTDB_OFFLOAD_MAX_CONTEXT_TOKENS"
    if host_floor and model_ratio is None and not settings.threshold_explicit \
            and not settings.max_context_tokens:
        floored = small_window_trigger(window, tokens)
        if floored != tokens:
            tokens, why = floored, "Hermes 0.22's small-window floor: never before its built-in"
    return Trigger(tokens, window, why)


def host_has_floor(version: Optional[Tuple[int, ...]]) -> bool:
    """Whether a Hermes of ``version`` applies the small-window floor (0.22 and later)."""
    return version is not None and tuple(version[:2]) >= FLOOR_SINCE


def trigger_text(settings: "Settings", trigger: Optional[Trigger]) -> str:
    """The trigger as status lines lead with it: the applying one when the window is known,
    else the configured threshold and where it may differ."""
    if trigger is not None and trigger.window:
        return "compaction at " + trigger.describe()
    note = "" if settings.threshold_explicit or settings.max_context_tokens else (
        " (on Hermes 0.22, outside the messaging gateway, never before the built-in on a "
        "64K-85K window: 85% at 64K)")
    cap = (", at most %s tokens" % format(settings.max_context_tokens, ",")
           if settings.max_context_tokens else "")
    return "compaction at %.0f%% of the window%s%s" % (settings.threshold * 100, cap, note)


def model_threshold(table: Any, model: str, provider: str, *, floor: float) -> Optional[float]:
    """The table's value for ``model`` (the host's matching rule), None when none applies."""
    if not isinstance(table, dict) or not table or not model:
        return None
    provider = (provider or "").strip().lower()
    ranked = [(r, raw) for key, raw in table.items()
              for r in [_rank(str(key), model, provider)] if r is not None]
    if not ranked:
        return None
    try:
        value = float(max(ranked, key=lambda pair: pair[0])[1])
    except (TypeError, ValueError):
        return None
    return value if floor < value < 1.0 else None
