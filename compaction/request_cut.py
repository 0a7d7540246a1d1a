"""A request the host would send near or past the window, cut for that request alone.

A host that pools compression compacts on a 4-worker pool shared by every agent of the process
and refuses work
while all four are busy ("Context compression pool saturated"); a cooldown after a failed
attempt skips it too. Then neither the turn-start nor the after-tool-step compaction runs and
the request goes out as it is: over the window when the step added big results.
``select_context`` sees every request before it leaves, so past ``REQUEST_CEILING`` of the
window it sends the local compaction of that request instead, at once (no Gateway wait: the
pool is what is short). The host's transcript is untouched; the engine then answers the host's
next check with "compact" until a compaction of the transcript lands, so this stays an
exception. What left the request is archived like any compaction's departures, and a trimmed
result keeps its pointer only when the archive holds its text.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Dict, List, Optional

from . import cut_memo
from .engine_view import CompactingEngine
from .flow import CompactionRun
from ..common.peer_text import plugin_logger
from ..hermes.host import running_host
from ..settings.thresholds import messaging_trigger, messaging_window
from ..context import messages

Message = Dict[str, Any]
log = plugin_logger("tencentdb_offload.compaction")
# Of the window. A request under it is one the provider takes, and a cut costs a rewrite (and
# the fresh results it trims): at 0.9 the messaging side-by-side, whose pool refuses often, cut
# requests at 0.93 and rewrote 3.6 times per conversation against the built-in's 2.9. The
# calibrated estimate errs by a few per cent; the ordinary trigger is at most 0.85 of the window.
REQUEST_CEILING = 0.95
# In the messaging gateway on the window its later trigger (0.85) is for: at 0.95, requests the
# pool let through reached 0.93 of the window (the held-out messaging shape, 100K); at 0.88 none
# passed 0.82.
MESSAGING_REQUEST_CEILING = 0.88


def ceiling_share(engine: CompactingEngine) -> float:
    """The share of the window past which a request is cut (``REQUEST_CEILING``); the earlier
    one only under the messaging gateway's own later trigger. Never under the trigger: a
    THRESHOLD, a model's threshold or a cap the user chose may lie past either ceiling, and
    cutting under the trigger would make the exception the rule (THRESHOLD 0.98 cut every
    request from 0.95 while status said 0.98)."""
    window = engine.context_length
    own = (running_host().checks_every_request and messaging_window(window)
           and engine.threshold_tokens == messaging_trigger(window, 0))
    if own:
        return MESSAGING_REQUEST_CEILING
    return max(REQUEST_CEILING, min(engine.threshold_tokens / window, 1.0)) if window > 0 \
        else REQUEST_CEILING


def too_big(engine: CompactingEngine, estimate: int) -> bool:
    """A request of ``estimate`` (ours, this conversation's calibration applies) would pass the
    ceiling."""
    window = engine.context_length
    return window > 0 and \
        engine.current_state().calibrator.to_real(estimate) > window * ceiling_share(engine)


def cut(engine: CompactingEngine, request: List[Message], estimate: int) -> Optional[List[Message]]:
    """The request (``estimate``: ours of it) compacted locally to the engine's target, or None
    when it is within the ceiling or nothing could be cut. Leading system messages go as they are."""
    if not too_big(engine, estimate):
        return None
    lead = messages.leading_systems(request)
    body = [m for m in request[lead:] if isinstance(m, dict)]
    if not body:
        return None
    run = CompactionRun(engine, body, lambda: False, wait_gateway=False)
    result, record = run.run(None, False)
    if record is None:
        return None
    state = engine.current_state()
    engine.runtime.record_compaction(state, replace(record, reason="request"))
    cut_memo.remember(engine, body, result, record)
    if not state.compact_transcript:    # said once until the host compacts its transcript
        state.transcript_due(True)
        log.warning("tencentdb-offload: %s: the host sent a request near the window "
                    "uncompacted (its compression pool busy or cooling down): cut for that "
                    "request alone", state.key)
    return list(request[:lead]) + result
