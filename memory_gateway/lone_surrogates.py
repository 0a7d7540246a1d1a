"""Lone UTF-16 surrogates on the Gateway's wire, both ways.

The Gateway is JavaScript: its strings are UTF-16. It truncates a tool result to its first
2000 code units (``slice``), so an emoji cut in two leaves a lone high surrogate, which its
``JSON.stringify`` sends as ``\\ud83d``; no provider accepts that text. Going out, a message
may hold a lone surrogate of its own (bytes a tool decoded with ``surrogateescape``): UTF-8
cannot carry it, a JSON escape can, and the Gateway hands it back unchanged.
"""

from __future__ import annotations

import re
from typing import Any, List

from ..context import blocks

LONE = re.compile("[\ud800-\udfff]")
# the high half the Gateway's cut leaves: at the end of what it kept, before its notice
SPLIT = re.compile("[\ud800-\udbff](?=\n\n\\[\\.\\.\\. content truncated|$)")
REPLACEMENT = "\ufffd"


def utf8(json_text: str) -> bytes:
    """JSON text (``ensure_ascii=False``) as UTF-8, each lone surrogate as its ``\\uXXXX``
    escape: json.dumps leaves them only inside strings, where the escape means the same."""
    try:
        return json_text.encode("utf-8")
    except UnicodeEncodeError:
        return LONE.sub(lambda m: "\\u%04x" % ord(m.group()), json_text).encode("utf-8")


def mend_results(reply: List[Any]) -> List[Any]:
    """``reply`` with the half character the Gateway's truncation left at the end of a tool
    result's kept text replaced by U+FFFD; any other lone surrogate is left to the checks
    (a peer that invents one is refused)."""
    out: List[Any] = []
    for m in reply:
        if isinstance(m, dict) and m.get("role") == "tool" and _has_split(m.get("content")):
            m = dict(m, content=_mended(m["content"]))
        elif isinstance(m, dict) and isinstance(m.get("content"), list) and any(
                blocks.read_block(b).kind is blocks.Kind.TOOL_RESULT
                and _has_split(b.get("content")) for b in m["content"]):
            m = dict(m, content=[_mended(b) if blocks.read_block(b).kind is blocks.Kind.TOOL_RESULT
                                 else b for b in m["content"]])
        out.append(m)
    return out


def _has_split(value: Any) -> bool:
    if isinstance(value, str):
        return SPLIT.search(value) is not None
    if isinstance(value, list):
        return any(_has_split(v) for v in value)
    if isinstance(value, dict):
        return any(_has_split(v) for v in value.values())
    return False


def _mended(value: Any) -> Any:
    if isinstance(value, str):
        return SPLIT.sub(REPLACEMENT, value)
    if isinstance(value, list):
        return [_mended(v) for v in value]
    if isinstance(value, dict):
        return {k: _mended(v) for k, v in value.items()}
    return value
