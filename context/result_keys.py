"""The read-back key of a tool result when its ``tool_call_id`` is not unique.

Some providers reuse call ids across turns (``call_0`` every turn). A result is a duplicate
only when its id and text both match; an id seen with different texts is *reused*, and each of
its results is then shown as ``<id>~<8 hex of the text's SHA-1>``, which reads back exactly that
text. An id seen with one text keeps the bare id, as always (pointers and prefixes unchanged).
"""

from __future__ import annotations

import hashlib
import re
from typing import AbstractSet, Any, Dict, Iterable, Optional, Set, Tuple

from .messages import is_tool_result, tool_results

SEP = "~"
DIGITS = 8
SUFFIX = re.compile(r"(.+)%s([0-9a-f]{%d})" % (SEP, DIGITS), re.S)


def content_hash(text: str) -> str:
    """The short hash of a result's text that tells its versions apart."""
    return hash_of_pieces((text,))


def hash_of_pieces(pieces: Iterable[str]) -> str:
    """``content_hash`` of the text the pieces make, read a piece at a time (an archived
    result of many MB is never loaded whole to find its version)."""
    digest = hashlib.sha1()
    for piece in pieces:
        digest.update(piece.encode("utf-8", "replace"))
    return digest.hexdigest()[:DIGITS]


def seen_mark(text: str) -> int:
    """What tells a call id's texts apart within this process (``SessionState.claim_result``):
    Python's own string hash, about 3x cheaper than ``content_hash`` on the hook's thread."""
    return hash(text)


def suffixed(tid: str, text: str) -> str:
    return tid + SEP + content_hash(text)


def split(key: str) -> Optional[Tuple[str, str]]:
    """(id, hash) of a suffixed key, else None."""
    found = SUFFIX.fullmatch(key)
    return (found.group(1), found.group(2)) if found else None


def pointer_in(tid: str, text: str) -> str:
    """The key an earlier pointer of ours for ``tid`` names inside ``text`` ("" when none):
    a trim trimmed again keeps the key of the text it stands for."""
    if 'tool_call_id="' not in text:
        return ""
    found = re.search(r'tool_call_id="(%s(?:%s[0-9a-f]{%d})?)"' % (re.escape(tid), SEP, DIGITS),
                      text)
    return found.group(1) if found else ""


def key_of(tid: str, text: str, reused: AbstractSet[str]) -> str:
    """The key shown for the result ``tid`` whose text in the context is ``text``."""
    if tid not in reused:
        return tid
    return pointer_in(tid, text) or suffixed(tid, text)


def reused_in(messages: Iterable[Any]) -> Set[str]:
    """Ids that carry different texts in ``messages`` (hashed only when an id repeats)."""
    texts: Dict[str, Set[str]] = {}
    for m in messages:
        if isinstance(m, dict) and is_tool_result(m):
            for tid, text in tool_results(m):
                texts.setdefault(tid, set()).add(text)
    return {tid for tid, seen in texts.items() if len(seen) > 1}
