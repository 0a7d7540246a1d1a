"""A recall pointer only for text the archive durably holds: every tool result the plugin
trimmed (or replaced by a summary) behind a ``tdai_read_cos`` pointer whose full text is not
held goes back whole, as it was before the compaction.

On a full disk the archive fails after the compaction already chose what to trim; giving the
pointer anyway would promise text that is gone after a restart. Pure: the caller says what
the archive holds.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Sequence, Tuple

from . import messages as M
from .provenance import Seal

Message = Dict[str, Any]
POINTER_KINDS = ("trim", "summary")      # our texts that point at the archive for the rest


def pointed(result: Sequence[Message], seal: Seal) -> List[str]:
    """Ids of the tool results in ``result`` that are our sealed trim or summary."""
    return [tid for m in result if M.is_tool_result(m) for tid, text in M.tool_results(m)
            if (seal.open_text(text) or ("",))[0] in POINTER_KINDS]


def restore(result: List[Message], before: Sequence[Message], seal: Seal,
            held: Callable[[str], bool]) -> Tuple[List[Message], int]:
    """``result`` with each result message whose pointer is not ``held`` replaced by its
    original from ``before`` (same ids, different text); and how many results went back."""
    originals: Dict[str, Message] = {}
    for m in before:
        if isinstance(m, dict) and M.is_tool_result(m):
            for tid in M.results_of(m):
                originals[tid] = m
    out: List[Message] = []
    restored = 0
    for m in result:
        ids = M.results_of(m) if M.is_tool_result(m) else []
        orig = originals.get(ids[0]) if ids else None
        if orig is not None and M.results_of(orig) == ids and orig != m:
            missing = [tid for tid in pointed([m], seal) if not held(tid)]
            if missing:
                out.append(M.fresh(orig))
                restored += len(missing)
                continue
        out.append(m)
    return out, restored
