"""The memory provider's recall blocks: keep the newest copy of each, drop older identical ones.

Hermes wraps what a memory provider recalls for a turn in one ``<memory-context>`` fence
(``agent/memory_manager.build_memory_context_block``, the same text on every supported release:
the opening tag, a fixed system note, a blank line, the recall with every fence tag removed,
the closing tag) and appends it to that turn's user message (``api_content``, or the request
copy on a host that selects context). Every past turn keeps its copy, so a long session
resends the same persona block once per turn. Only that exact shape is a recall block. Pure: the caller
archives what was removed.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional, Set, Tuple

Message = Dict[str, Any]

OPEN = "<memory-context>"
NOTE = ("[System note: The following is recalled memory context, NOT new user input. Treat as "
        "authoritative reference data \u2014 this is the agent's persistent memory and should "
        "inform all responses.]")
_BLOCK_RE = re.compile(r"<memory-context>\n%s\n\n(?:(?!(?i:</?\s*memory-context\s*>)).)*"
                       r"\n</memory-context>" % re.escape(NOTE), re.S)
FIELDS = ("content", "api_content")


def blocks(text: Any) -> List[str]:
    """The recall blocks in ``text``, in order."""
    if not isinstance(text, str) or OPEN not in text:
        return []
    return _BLOCK_RE.findall(text)


def _texts(msg: Message) -> List[str]:
    out = []
    for field in FIELDS:
        value = msg.get(field)
        if isinstance(value, str):
            out.append(value)
        elif isinstance(value, list):
            out += [b["text"] for b in value if isinstance(b, dict) and isinstance(b.get("text"), str)]
    return out


def _cut(text: str, drop: Set[str]) -> str:
    """``text`` without the blocks in ``drop`` (each with the blank line that joined it)."""
    for block in drop:
        while block in text:
            at = text.index(block)
            s, e = at, at + len(block)
            if text[s - 2:s] == "\n\n":
                s -= 2
            elif text[e:e + 2] == "\n\n":
                e += 2
            text = text[:s] + text[e:]
    return text


def _without(msg: Message, drop: Set[str]) -> Optional[Message]:
    """``msg`` without ``drop`` in its content and ``api_content``, the rest byte for byte;
    None when that would leave no words of the user's (the block then stays)."""
    out = dict(msg)
    for field in FIELDS:
        value = msg.get(field)
        if isinstance(value, str):
            out[field] = _cut(value, drop)
        elif isinstance(value, list):
            out[field] = _cut_parts(value, drop)
    content = out.get("content")
    if msg.get("content") and (content == [] or isinstance(content, str) and not content.strip()):
        return None
    return out


def _cut_parts(parts: List[Any], drop: Set[str]) -> List[Any]:
    """A content list without ``drop``; a text part the cut leaves blank goes (providers
    refuse an empty text block)."""
    out = []
    for b in parts:
        if isinstance(b, dict) and isinstance(b.get("text"), str):
            text = _cut(b["text"], drop)
            if text != b["text"] and not text.strip():
                continue
            b = dict(b, text=text)
        out.append(b)
    return out


def keep_newest(messages: List[Any], oldest: bool = False) -> Tuple[List[Any], List[str]]:
    """``messages`` with every recall block kept only in the newest user message holding it
    (older identical copies removed from content and ``api_content``); and the blocks removed,
    one entry per copy. The same list when there is nothing to remove.

    ``oldest=True`` keeps the first copy instead: for a request rebuilt every time (the host's
    ``select_context``), so that each turn's new copy goes and the prefix the provider cached
    stays byte-identical; the copy is the same text either way."""
    newest: Dict[str, int] = {}
    found: List[Tuple[int, Set[str]]] = []
    for i, m in enumerate(messages):
        if isinstance(m, dict) and m.get("role") == "user":
            held = {b for t in _texts(m) for b in blocks(t)}
            if held:
                found.append((i, held))
                for b in held:
                    if not (oldest and b in newest):
                        newest[b] = i
    out, removed = None, []
    for i, held in found:
        drop = {b for b in held if newest[b] != i}
        fixed = _without(messages[i], drop) if drop else None
        if fixed is None:
            continue
        out = out if out is not None else list(messages)
        out[i] = fixed
        removed += [b for t in _texts(messages[i]) for b in blocks(t) if b in drop]
    return (out, removed) if out is not None else (messages, [])
