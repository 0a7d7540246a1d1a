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

What the cut sent is kept (``CutMemo``) so that the transcript compaction after it lands on
the same bytes: the host's transcript still holds everything, and a compaction choosing afresh
would land elsewhere, a second rewrite of the prompt cache's prefix one request later. When the
transcript still begins with exactly what the cut was made from, its compaction is the cut
followed by what came since (``catch_up``, reason ``adopted``), as long as that stays under the
trigger; else the ordinary compaction runs.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, replace
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from .engine_view import CompactingEngine
from .flow import CompactionRun
from ..common.peer_text import plugin_logger
from ..hermes.host import running_host
from ..session.record import Compaction
from ..settings.thresholds import messaging_trigger, messaging_window
from ..context.messages import fresh, leading_systems

Message = Dict[str, Any]
log = plugin_logger("tencentdb_offload.compaction")
# Of the window. A request under it is one the provider takes, and a cut costs a rewrite (and
# the fresh results it trims): a lower ceiling cut more often than the built-in rewrites, and
# the calibrated estimate errs by a few per cent (docs/benchmarks.md, "request ceiling").
REQUEST_CEILING = 0.95
# In the messaging gateway on the window its later trigger is for: at the ordinary ceiling,
# requests the pool let through came too near the window (docs/benchmarks.md).
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
    lead = leading_systems(request)
    body = [m for m in request[lead:] if isinstance(m, dict)]
    if not body:
        return None
    run = CompactionRun(engine, body, lambda: False, wait_gateway=False)
    result, record = run.run(None, False)
    if record is None:
        return None
    state = engine.current_state()
    engine.runtime.record_compaction(state, replace(record, reason="request"))
    remember(engine, body, result, record)
    if not state.compact_transcript:    # said once until the host compacts its transcript
        state.transcript_due(True)
        log.warning("tencentdb-offload: %s: the host sent a request near the window "
                    "uncompacted (its compression pool busy or cooling down): cut for that "
                    "request alone", state.key)
    return list(request[:lead]) + result


@dataclass(frozen=True)
class CutMemo:
    source: Tuple[str, ...]     # keys of the messages the cut was made from (after the system ones)
    result: Tuple[Message, ...]  # what it sent instead of them
    record: Compaction


def message_key(m: Any) -> str:
    """What a message says to the model: role, the bytes sent (``api_content`` where the host
    keeps them beside ``content``), its call id and calls; host bookkeeping keys left out."""
    if not isinstance(m, dict):
        return "?"
    calls = [(c.get("id"), (c.get("function") or {}).get("name"),
              (c.get("function") or {}).get("arguments"))
             for c in m.get("tool_calls") or () if isinstance(c, dict)]
    said = {"role": m.get("role"), "content": m.get("api_content", m.get("content")),
            "tool_call_id": m.get("tool_call_id"), "tool_calls": calls}
    raw = json.dumps(said, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha1(raw.encode("utf-8", "replace")).hexdigest()


def remember(engine: CompactingEngine, body: Sequence[Message], result: Sequence[Message],
             record: Compaction) -> None:
    engine.current_state().remember_cut(
        CutMemo(tuple(map(message_key, body)), tuple(fresh(m) for m in result), record))


def catch_up(engine: CompactingEngine, messages: List[Any], reason: str,
             cancelled: Callable[[], bool]) -> Optional[Tuple[List[Any], Compaction]]:
    """The transcript compaction (started by ``reason``) that keeps the last cut's bytes, or
    None: not an ordinary one, no cut waiting, the transcript no longer begins with its source,
    it would not land under the trigger, or the host cancelled this attempt."""
    started = time.monotonic()
    state = engine.current_state()
    memo = state.take_cut()             # set only while the transcript is due
    if memo is None or reason != "threshold":
        return None
    lead = leading_systems(messages)
    body = messages[lead:]
    n = len(memo.source)
    if len(body) < n or tuple(map(message_key, body[:n])) != memo.source:
        return None
    out = list(messages[:lead]) + list(memo.result) + list(body[n:])    # taken once: no copy
    after = engine.estimate_real(out)
    if engine.threshold_tokens <= 0 or after >= engine.threshold_tokens or cancelled():
        return None
    state.transcript_due(False)
    # what left was archived, listed and counted when the request was cut: said once, there
    return out, replace(memo.record, tokens_before=engine.estimate_real(messages),
                        tokens_after=after, archived=0, left=(), at=engine.runtime.clock.now(),
                        reason="adopted", ms=round((time.monotonic() - started) * 1000, 1))
