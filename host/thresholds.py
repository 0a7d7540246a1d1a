"""Where compaction triggers: Hermes' ``compression.model_thresholds``, matched the way the host
matches them, and the host's own floor on small windows.

0.22 sets the table on the engine before ``update_model``. For a model it names, its value
wins over ours: the longest matching substring, a ``provider:``-scoped key before a bare one of
the same length (the host's rule, so one table means the same under both engines). A value at
or below our landing ratio is ignored: every compaction would trigger the next.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

HOST_MINIMUM_CONTEXT = 64_000   # Hermes' MINIMUM_CONTEXT_LENGTH: no window is smaller
SMALL_WINDOW_RATIO = 0.85       # where the built-in triggers when that floor binds


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


def small_window_note(settings: Dict[str, Any]) -> str:
    """What status lines add to the configured threshold (the settings as status shows them)."""
    if settings.get("threshold_explicit"):
        return ""
    return (" (on 0.22, outside the messaging gateway, never before the built-in on a 64K-85K "
            "window: 85% at 64K)")


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
