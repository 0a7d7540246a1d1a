"""A recall pointer only for text the archive durably holds: every tool result the plugin
trimmed (or replaced by a summary, or the Gateway cut) behind a ``tdai_read_cos`` pointer
whose full text is not held goes back whole, as it was before the compaction; any other mark
that names a text the archive does not hold (a digest's ``[id]``, a trim's pointer that could
not go back whole, a call's arguments) says in its place that the text was not kept.

On a full disk the archive fails after the compaction already chose what to trim; giving the
pointer anyway would promise text that is gone after a restart (writes held in memory for a
retry do not survive one). Pure: the caller says what the archive holds.
"""

from __future__ import annotations

import re
from typing import AbstractSet, Any, Callable, Dict, List, Optional, Sequence, Tuple

from . import digest
from . import gateway_cuts
from . import messages
from . import result_keys
from .provenance import Seal

Message = Dict[str, Any]
POINTER_KINDS = ("trim", "summary")      # our texts that point at the archive for the rest


def pointed(result: Sequence[Message], seal: Seal) -> List[str]:
    """Keys the trim or summary pointers of ours in ``result`` name (the call id, or its
    ``result_keys`` key when the id is reused), and those ending a result the Gateway cut."""
    return [result_keys.pointer_in(tid, text) or tid
            for m in result for tid, text in messages.tool_results(m)     # (beside text too)
            if (seal.open_text(text) or ("",))[0] in POINTER_KINDS or text.endswith(
                "\n" + gateway_cuts.HINT % (result_keys.pointer_in(tid, text) or "\0"))]


def unkept(messages: Sequence[Any], lost: AbstractSet[str], why: str, seal: Seal
           ) -> Tuple[List[Any], int]:
    """``messages`` with every mark naming a key of ``lost`` rewritten to say the text was
    not kept (and ``why``): a ``tdai_read_cos(…)`` pointer anywhere, also inside call
    arguments, and a digest's keys (``digest.unkept``); our sealed texts sealed again. And how
    many messages changed."""
    if not lost:
        return list(messages), 0
    keys = "|".join(re.escape(k) for k in sorted(lost, key=len, reverse=True))
    call = re.compile(r'(full (?:text|arguments): )?tdai_read_cos\((?:tool_call_id|key)=(\\?)"'
                      r'(?:%s)\2"\)' % keys)
    why = re.sub(r'["\\]', "", why)

    def pointers(text: str) -> str:
        return call.sub(lambda m: "%snot kept (%s)" % (
            (m.group(1) or "")[:-2] + " " if m.group(1) else "", why), text)

    def fix(text: str) -> str:
        opened = seal.open_text(text)
        if opened is None:
            return pointers(text)
        kind, body = opened
        new = pointers(body)
        new = digest.unkept(new, lost, why) if kind == digest.KIND else new
        return text if new == body else seal.seal_text(kind, new)

    out, changed = [], 0
    for m in messages:
        new = _strings(m, fix) if isinstance(m, dict) else m
        if new != m:
            changed += 1
            new = {k: v for k, v in new.items() if k != "api_content" and not k.startswith("_")}
        out.append(new)
    return out, changed


def _strings(value: Any, fix: Callable[[str], str]) -> Any:
    """``value`` with ``fix`` applied to every string in it (dicts and lists rebuilt)."""
    if isinstance(value, str):
        return fix(value)
    if isinstance(value, dict):
        return {k: _strings(v, fix) for k, v in value.items()}
    if isinstance(value, list):
        return [_strings(v, fix) for v in value]
    return value


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
            for tid, text in messages.tool_results(m):
                originals[result_keys.key_of(tid, text, reused)] = m
    out: List[Message] = []
    restored = 0
    for m in reversed(result):
        missing = [key for key in pointed([m], seal) if not held(key)] \
            if messages.results_of(m) else []
        orig = next((originals[k] for k in missing if k in originals), None)
        if orig is not None and messages.results_of(orig) == messages.results_of(m) and orig != m:
            if fits is None or fits(m, orig):
                out.append(messages.fresh(orig))
                restored += len(missing)
                continue
            honest = unheld(orig) if unheld is not None else None
            if honest is not None:
                out.append(honest)
                continue
        out.append(m)
    out.reverse()
    return out, restored
