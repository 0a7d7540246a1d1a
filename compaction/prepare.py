"""When a Gateway compaction is prepared before ``compress()`` needs it (pooled compression).

Near the trigger (``PREPARE_FROM`` of it, after a tool step or a turn) it is prepared at once
(``PreparedCompactions``). At a turn's end past the idle trigger, with a cache TTL set, it is
booked for the pause instead (``PauseBookings``): started once most of the TTL has passed with
no newer response, so that the cold turn start that follows finds it ready and waits for nothing.
"""

from __future__ import annotations

from typing import Any

from . import idle
from .ahead import Aim
from .engine_view import CompactingEngine
from ..context.tokens import TokenMemo

PREPARE_FROM = 0.8          # of the trigger: prepared at once from here
PREPARE_AFTER_PAUSE = 0.8   # of the cache TTL: when an idle turn start's compaction is prepared


def ahead(engine: CompactingEngine, messages: Any, current_tokens: Any = None,
          turn_end: bool = False) -> None:
    """Prepare now near the trigger; at a turn's end past the idle trigger, book it for when
    the cache will have gone cold. Never raises (a host hook calls it)."""
    rt = engine.runtime
    prepared = rt.gateway.prepared
    if (not isinstance(messages, list) or not rt.settings.enabled or not rt.gateway.available
            or engine.threshold_tokens <= 0):
        return
    try:
        state = engine.current_state()
        if prepared.busy(state.key):        # one job per conversation: nothing to measure
            return
        tokens = current_tokens if isinstance(current_tokens, int) and current_tokens > 0 \
            else engine.estimate_real(messages)
        now = tokens >= engine.threshold_tokens * PREPARE_FROM
        ttl = rt.settings.cache_ttl_s
        later = turn_end and ttl > 0 and tokens >= idle.idle_trigger(
            engine.threshold_tokens, engine.compaction_target())
        if not (now or later):
            return
        clean, _removed, _copies = rt.sealed.without_our_blocks(messages)
        args = (state, clean, Aim.of(engine.compaction_target(), engine.context_length),
                state.overhead_estimate, TokenMemo())
        if now:
            prepared.start(*args)
        else:
            prepared.after_pause.book(state.key, ttl * PREPARE_AFTER_PAUSE, args,
                                      idle.pause_unused(state))
    except Exception:
        rt.note_fault("preparing a compaction failed", engine.current_state().key)
