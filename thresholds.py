"""Hermes' ``compression.model_thresholds``, matched the way the host matches them.

0.22 sets the table on the engine before ``update_model``. For a model it names, its value
wins over ours: the longest matching substring, a ``provider:``-scoped key before a bare one of
the same length (the host's rule, so one table means the same under both engines). A value at
or below our landing ratio is ignored: every compaction would trigger the next.
"""

from __future__ import annotations

from typing import Any, Optional, Tuple


def _rank(key: str, model: str, provider: str) -> Optional[Tuple[int, int]]:
    scope, sep, part = key.partition(":")
    if sep:
        return (len(part), 1) if scope.strip().lower() == provider and part in model else None
    return (len(key), 0) if key in model else None


def model_threshold(table: Any, model: str, provider: str, *, default: float,
                    floor: float) -> float:
    if not isinstance(table, dict) or not table or not model:
        return default
    provider = (provider or "").strip().lower()
    ranked = [(r, raw) for key, raw in table.items()
              for r in [_rank(str(key), model, provider)] if r is not None]
    if not ranked:
        return default
    try:
        value = float(max(ranked, key=lambda pair: pair[0])[1])
    except (TypeError, ValueError):
        return default
    return value if floor < value < 1.0 else default
