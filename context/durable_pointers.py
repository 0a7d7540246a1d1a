"""A recall pointer only for text the archive durably holds: every tool result the plugin
trimmed (or replaced by a summary) behind a ``tdai_read_cos`` pointer whose full text is not
held goes back whole, as it was before the compaction.

On a full disk the archive fails after the compaction already chose what to trim; giving the
pointer anyway would promise text that is gone after a restart. Pure: the caller says what
the archive holds.
"""

from __future__ import annotations

from typing import AbstractSet, Any, Callable, Dict, List, Optional, Sequence, Tuple

from . import messages as M
from . import result_keys
from .provenance import Seal

Message = Dict[str, Any]
POINTER_KINDS = ("trim", "summary")      # our texts that point at the archive for the rest


def pointed(result: Sequence[Message], seal: Seal) -> List[str]:
    """Keys the trim or summary pointers of ours in ``result`` name (the call id, or its
    ``result_keys`` key when the id is reused)."""
    return [result_keys.pointer_in(tid, text) or tid
            for m in result for tid, text in M.tool_results(m)     # (beside text too)
            if (seal.open_text(text) or ("",))[0] in POINTER_KINDS]


def restore(result: List[Message], before: Sequence[Message], seal: Seal,
            held: Callable[[str], bool], reused: AbstractSet[str] = frozenset(),
            fits: Optional[Callable[[Message, Message], bool]] = None,
            unheld: Optional[Callable[[Message], Optional[Message]]] = None
            ) -> Tuple[List[Message], int]:
    """``result`` with each result message whose pointer is not ``held`` replaced by its
    original from ``before`` (same ids, the text the pointer names); and how many results
    went back. Newest first, an original goes back only while ``fits(now, original)``; one
    that does not becomes ``unheld(original)`` (a trim promising no recall): kept whole, every
    later request would be over the window and the host refuses them all."""
    originals: Dict[str, Message] = {}
    for m in before:
        if isinstance(m, dict):
            for tid, text in M.tool_results(m):
                originals[result_keys.key_of(tid, text, reused)] = m
    out: List[Message] = []
    restored = 0
    for m in reversed(result):
        missing = [key for key in pointed([m], seal) if not held(key)] \
            if M.results_of(m) else []
        orig = next((originals[k] for k in missing if k in originals), None)
        if orig is not None and M.results_of(orig) == M.results_of(m) and orig != m:
            if fits is None or fits(m, orig):
                out.append(M.fresh(orig))
                restored += len(missing)
                continue
            honest = unheld(orig) if unheld is not None else None
            if honest is not None:
                out.append(honest)
                continue
        out.append(m)
    out.reverse()
    return out, restored
