"""Compaction ahead of the ceiling: at a turn start, when the turn's next step would carry the
request past the ceiling, compact now and land as deep as the unseen allows
(``TencentDBOffloadEngine.deepest_target``).

A step (one tool round's results) arrives whole in the request after it. Compacted mid-turn,
over those fresh results, a landing must keep them whole (the model has not read them) and
keep what it has read above the target. Compacted at the turn start before them, everything
the model has read can go behind recall: the step lands on a small prefix, and the next
rewrite comes as late. Only where the host checks a request before the turn's first one (its
preflight) is the turn start known; elsewhere the threshold alone decides. The messaging
gateway included: with the small-window floor's trigger at the ceiling on a 64K window, this
check kept every fresh read whole there at the floor's rewrites (docs/benchmarks.md); a turn
start its shared compression pool refuses falls back on the mid-turn trigger, and past that
on the request cut (``request_cut``).
"""

from __future__ import annotations

from typing import Any

from ..hermes.host import running_host
from ..settings.thresholds import CEILING


def limit(engine: Any) -> int:
    """The request size the next step must not pass: the ceiling, or the trigger when lower
    (a mid-turn compaction would come anyway, over the step's fresh results)."""
    ceiling = int(engine.context_length * CEILING)
    return min(ceiling, engine.threshold_tokens) if engine.threshold_tokens > 0 else ceiling


def passes_next(engine: Any, tokens: Any) -> bool:
    """At a turn start with a request of ``tokens``: under the trigger, at or over the
    ordinary landing (so a landing never triggers the next), and one step of the size the
    conversation's last turn took would pass ``limit``."""
    host = running_host()
    if not host.selects_context or not engine.context_length:
        return False
    if not isinstance(tokens, (int, float)) or not engine.runtime.settings.enabled:
        return False
    growth = engine.current_state().cache.step_growth()
    edge = limit(engine)
    return growth > 0 and engine.compaction_target() <= tokens < edge < tokens + growth
