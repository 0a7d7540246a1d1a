"""Whether the provider's prompt cache has gone cold, and how far a compaction then goes.

A provider's prompt cache expires after an idle time (``TENCENTDB_OFFLOAD_CACHE_TTL_S``). After
a longer pause since the conversation's last provider response the next request is written in
full whatever the engine does, so a compaction there costs no extra cache write and makes
every request of the turn smaller: it starts below the ordinary target (``IDLE_FROM`` of it)
and lands deeper (``IDLE_DEPTH`` of it). The last
response time reaches later processes through the runtime's handover; what the provider's
cache report says after a pause raises the TTL we assume when the cache stayed warm.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Mapping

from .process_view import CompactionProcess

IDLE_FROM = 0.8        # of the target: with the defaults (0.45) 0.36 of the window
IDLE_DEPTH = 0.6       # of the target: with the defaults 0.27 of the window. A cold request is
#                        written whole anyway: the deeper, the cheaper (docs/benchmarks.md,
#                        "Why the defaults are what they are")



def idle_trigger(trigger_tokens: int, target_tokens: int) -> int:
    """Where a cold turn start compacts: below the ordinary target, so a turn that starts
    just under it and grows past it is compacted while the cache is cold anyway, not at the
    next warm one (docs/benchmarks.md). The host asks only past its own gate
    (more than protect_first_n + protect_last_n + 1 messages): the engine's protect_last_n is 0
    (6 in the messaging gateway, see engine.py)."""
    return min(trigger_tokens, int(target_tokens * IDLE_FROM))


def idle_target(target_tokens: int) -> int:
    return int(target_tokens * IDLE_DEPTH)


# -- for the engine: one conversation's state on the runtime's clocks -----------------------
def due(rt: CompactionProcess, state: Any) -> bool:
    """A pause longer than the cache TTL since the last response, not yet used."""
    return rt.settings.enabled and state.cache.idle_due(rt.settings.cache_ttl_s, rt.clock.now(),
                                                        rt.clock.monotonic())


def wanted(engine: Any, tokens: Any) -> bool:
    """``tokens`` past the engine's idle trigger, on a cold and unused pause."""
    trigger = engine.threshold_tokens
    return (isinstance(tokens, (int, float)) and trigger > 0
            and tokens >= idle_trigger(trigger, engine.compaction_target())
            and due(engine.runtime, engine.current_state()))


def pause_unused(state: Any) -> Callable[[], bool]:
    """A check, for later: the conversation has had no response since now, nor an idle
    compaction (what was prepared during its pause is still wanted)."""
    stamp = state.cache.last_wall
    return lambda: state.cache.untouched_since(stamp)


def start(rt: CompactionProcess, state: Any) -> str:
    """Why a compaction starts now: "idle" on a cold cache (the pause is then used up, in this
    process and the next ones, whatever comes of it), else "threshold"."""
    if not due(rt, state):
        return "threshold"
    state.cache.spend()
    rt.archive.leave_for_next_process(state.key, "cache_clock", state.cache.export())
    return "idle"


def responded(rt: CompactionProcess, state: Any, prompt: int, usage: Mapping[str, Any]) -> bool:
    """A provider response: note its time (handed over) and what its cache report teaches;
    True when it is the first after a compaction."""
    after = state.cache.responded(prompt, usage, rt.settings.cache_ttl_s, rt.clock.now(),
                                  rt.clock.monotonic())
    rt.archive.leave_for_next_process(state.key, "cache_clock", state.cache.export())
    return after


def snapshot(rt: CompactionProcess, state: Any) -> Dict[str, Any]:
    return state.cache.snapshot(rt.settings.cache_ttl_s, rt.clock.now(), rt.clock.monotonic())
