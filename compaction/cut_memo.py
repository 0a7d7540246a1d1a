"""What a request cut sent, kept so that the transcript compaction after it lands on the same bytes.

On a host that selects context, a request it sends near the window uncompacted is cut for itself
(``request_cut``); the host's transcript still holds everything, and the compaction the engine
then asks for would choose afresh, and land elsewhere: a second rewrite of the prompt cache's
prefix one request later (docs/benchmarks.md). When the transcript still begins with
exactly what the cut was made from, its compaction is the cut followed by what came since, as
long as that stays under the trigger; else the ordinary compaction runs.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, replace
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from .engine_view import CompactingEngine
from ..session.record import Compaction
from ..context.messages import fresh, leading_systems

Message = Dict[str, Any]


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
                        tokens_after=after, archived=0, left=(), at=engine.runtime.now(),
                        reason="adopted", ms=round((time.monotonic() - started) * 1000, 1))
