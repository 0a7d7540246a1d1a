"""What the model asked to read back in the current turn (the results of its ``tdai_read_cos``
calls after the newest user message), and what it asked for and has not read yet (the newest
step's results). A Gateway's reply gets them back whole, as the request held them: trimmed, a
read-back would only point to itself, and a fresh result would be read again and paid twice.
Our own compaction then trims as few of the fresh ones as fit (``fallback``)."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Set

from .messages import call_args, group_spans, newest_real_user, results_of
from .provenance import Seal

Message = Dict[str, Any]
RECALL_TOOL = "tdai_read_cos"       # the engine's read-back tool (archive/recall.py serves it)


def asked_back(messages: Sequence[Message], seal: Optional[Seal] = None) -> Set[str]:
    """Ids of the current turn's calls to the read-back tool."""
    start = newest_real_user(messages, seal=seal)
    if start < 0:
        return set()
    return {tid for m in messages[start:] if isinstance(m, dict)
            for tid, (name, _args) in call_args(m).items() if name == RECALL_TOOL}


def unread(messages: Sequence[Message], seal: Optional[Seal] = None) -> Set[str]:
    """Ids of the newest step's results when that step belongs to the current turn: the
    model asked for them, and no request has carried them yet."""
    start = newest_real_user(messages, seal=seal)
    spans = group_spans(messages)
    if start < 0 or not spans or spans[-1][0] <= start:
        return set()
    s, e = spans[-1]
    return {tid for m in messages[s + 1:e] if isinstance(m, dict) for tid in results_of(m)}


def restore(original: Sequence[Message], reply: List[Message],
            seal: Optional[Seal] = None) -> List[Message]:
    """``reply`` with the current turn's read-backs and the newest step's unread results as
    ``original`` holds them: a Gateway that truncated one is repaired, nothing else changes."""
    ids = asked_back(original, seal) | unread(original, seal)
    if not ids:
        return reply
    whole = {frozenset(results_of(m)): m for m in original
             if isinstance(m, dict) and ids.intersection(results_of(m))}
    return [whole.get(frozenset(results_of(m)), m) if isinstance(m, dict) else m
            for m in reply]
