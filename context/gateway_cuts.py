"""A tool result the Gateway cut or replaced keeps a pointer to the text it came from.

The Gateway truncates large tool results (their first 2,000 characters and a notice). Under a
call id the provider reused, each text is read back by ``<id>~<hash of the text>``
(``result_keys``); a later local trim or departure of the Gateway's cut would take its key
from the cut text, which the archive never held: the pointer named nothing, and each
compaction put the result back whole ("the archive does not hold them"). The same when the
provider reuses the id only after the Gateway replaced its result by a reference: the digest
named a key of the reference's text, which nothing holds. The changed text gets the key of
the text it came from, so every later key is that one.
"""

from __future__ import annotations

from collections import Counter
from typing import AbstractSet, Any, Dict, List, Optional, Sequence, Tuple

from .blocks import Kind, content_blocks
from . import messages
from . import result_keys

Message = Dict[str, Any]
HINT = "full text: tdai_read_cos(tool_call_id=\"%s\")"     # as the plugin's own trims say it
HEAD, MIN_HEAD = 200, 20        # of a text's beginning: what is compared, what must be found


def source_of(cut: str, versions: Sequence[str]) -> Optional[str]:
    """The one text of ``versions`` whose beginning ``cut`` holds the most of (its cut keeps
    the head, its reference quotes it, a merge of results holds it whole), the text the
    Gateway changed; None when two tie or too little is held to tell."""
    if cut in versions:
        return None
    scored = sorted(((_head_held(v, cut), v) for v in set(versions)), reverse=True)
    if not scored or scored[0][0] < MIN_HEAD:       # too little of any to tell
        return None
    if len(scored) > 1 and scored[1][0] == scored[0][0]:
        return None
    return scored[0][1]


def _head_held(text: str, cut: str) -> int:
    """How many of ``text``'s first ``HEAD`` characters ``cut`` holds as one piece."""
    low, high = 0, min(HEAD, len(text))
    while low < high:                       # the held length is monotone: bisect it
        mid = (low + high + 1) // 2
        if text[:mid] in cut:
            low = mid
        else:
            high = mid - 1
    return low


def keyed(sent: Sequence[Message], reply: List[Message], reused: AbstractSet[str]) -> List[Message]:
    """``reply`` with each result the Gateway changed (none of the texts ``sent`` held under
    its id) followed by the pointer to the text it came from: the bare id, or under a
    ``reused`` id that text's own key. An id the provider reuses only later keeps reading the
    text the Gateway saw, not the hash of the Gateway's stand-in."""
    versions: Dict[str, List[str]] = {}
    for m in sent:
        if isinstance(m, dict):
            for tid, text in messages.tool_results(m):
                versions.setdefault(tid, []).append(text)
    back = Counter(tid for m in reply if isinstance(m, dict)
                   for tid, _t in messages.tool_results(m))
    nth: Counter = Counter()
    out = []
    for m in reply:
        new: Dict[Tuple[str, str], str] = {}
        for tid, text in (messages.tool_results(m) if isinstance(m, dict) else ()):
            nth[tid] += 1
            if tid not in versions or text in versions[tid] or result_keys.pointer_in(tid, text):
                continue
            if len(set(versions[tid])) == 1:     # (its reference may quote another text
                origin: Optional[str] = versions[tid][0]    # of the id: it keys by the id)
            elif back[tid] == len(versions[tid]):   # all came back, in order (reply_origin):
                origin = versions[tid][nth[tid] - 1]    # one reference for all quotes neither
            else:
                origin = source_of(text, versions[tid])
            if origin is not None:      # (a trim of ours it came from names the key already)
                new[(tid, text)] = text + "\n" + HINT % result_keys.key_of(tid, origin, reused)
        out.append(_with_texts(m, new) if new else m)
    return out


def _with_texts(m: Message, new: Dict[Tuple[str, str], str]) -> Message:
    content = m.get("content")
    if messages.role(m) == "tool" or not isinstance(content, list):     # one result
        (text,) = new.values()
        return messages.with_content(m, text)
    blocks = []
    for b in content_blocks(content):
        key = (b.id, b.text)
        blocks.append(dict(b.raw, content=new[key]) if b.kind is Kind.TOOL_RESULT
                      and key in new else b.raw)
    return messages.with_content(m, blocks)
