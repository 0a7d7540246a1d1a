"""Old tool-call arguments made short: still valid JSON, same keys, long strings cut with a pointer.

A conversation whose size sits in arguments (a 40 KB ``write_file`` body) cannot be brought
under its target by trimming results alone. What identifies a call (its keys, a path, a
command, a URL) stays whole; only long string values are cut to head + tail, with a pointer to
the archived original under ``args_key(tool_call_id)``. Pure: the caller archives what
``trim_call_args`` reports.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional, Tuple

from . import blocks
from . import messages

Message = Dict[str, Any]
ARGS_SUFFIX = ".arguments"
# keys whose value names what a call touched: never cut below IDENTIFYING_CHARS
IDENTIFYING = ("path", "file_path", "filepath", "file", "filename", "command", "cmd", "query",
               "q", "url", "uri", "pattern", "name", "target", "tool_call_id", "id")
IDENTIFYING_CHARS = 2000
MAX_DEPTH = 40                  # deeper values are kept as they are (json.loads accepts ~1000)


def args_key(tool_call_id: str) -> str:
    """The archive key (a ``tool_call_id`` for ``tdai_read_cos``) of a call's full arguments."""
    return tool_call_id + ARGS_SUFFIX


def _pointer(tid: str, recallable: bool) -> str:
    if recallable:
        return "full arguments: tdai_read_cos(tool_call_id=\"%s\")" % args_key(tid)
    return "full arguments held for the archive"


def _cut(value: Any, limit: int, pointer: str, key: str = "", depth: int = 0) -> Any:
    """``value`` with every string over its limit trimmed; containers rebuilt, keys kept."""
    if depth > MAX_DEPTH:
        return value
    if isinstance(value, str):
        bound = max(limit, IDENTIFYING_CHARS) if key.lower() in IDENTIFYING else limit
        return messages.trim_text(value, bound, pointer) if len(value) > bound else value
    if isinstance(value, dict):
        return {k: _cut(v, limit, pointer, str(k), depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [_cut(v, limit, pointer, key, depth + 1) for v in value]
    return value


def _shorter_args(raw: Any, limit: int, pointer: str) -> Tuple[Any, bool]:
    """(new arguments in the same form as ``raw``, changed?)."""
    if isinstance(raw, str):
        if len(raw) <= limit:
            return raw, False
        try:
            parsed = json.loads(raw)
        except (ValueError, RecursionError):
            return messages.trim_text(raw, limit, pointer), True     # not JSON: it was never valid
        try:
            text = json.dumps(_cut(parsed, limit, pointer), ensure_ascii=False)
        except (ValueError, TypeError, RecursionError):
            return raw, False
        return (text, True) if len(text) < len(raw) else (raw, False)
    if isinstance(raw, (dict, list)):
        try:
            size = len(json.dumps(raw, ensure_ascii=False, default=str))
        except (ValueError, TypeError, RecursionError):
            return raw, False
        if size <= limit:
            return raw, False
        return _cut(raw, limit, pointer), True
    return raw, False


def trim_call_args(msg: Message, limit: int,
                   recallable: bool = True) -> Optional[Tuple[Message, List[Tuple[str, str, str]]]]:
    """A copy of an assistant message whose long call arguments are cut, and (tool_call_id,
    tool name, full arguments text) for each call cut; None when nothing is over ``limit``."""
    if messages.role(msg) != "assistant" or not messages.calls_of(msg):
        return None
    cut: List[Tuple[str, str, str]] = []
    out = dict(msg)
    if msg.get("tool_calls"):
        out["tool_calls"] = [_cut_call(b, limit, recallable, cut)
                             for b in blocks.call_blocks(msg["tool_calls"])]
    if isinstance(msg.get("content"), list):
        out["content"] = [_cut_call(b, limit, recallable, cut)
                          for b in blocks.content_blocks(msg["content"])]
    if not cut:
        return None
    return {k: v for k, v in out.items() if k != "api_content" and not k.startswith("_")}, cut


def _cut_call(b: blocks.Block, limit: int, recallable: bool,
              cut: List[Tuple[str, str, str]]) -> Any:
    """The call (a ``tool_calls`` entry or a ``tool_use`` block) with its arguments cut, noted
    in ``cut``; anything else as it was."""
    if b.kind is not blocks.Kind.TOOL_USE or not b.id:
        return b.raw
    new, changed = _shorter_args(b.args, limit, _pointer(b.id, recallable))
    if not changed:
        return b.raw
    cut.append((b.id, b.name, blocks.as_text(b.args)))
    if b.in_calls:
        return dict(b.raw, function=dict(b.raw.get("function") or {}, arguments=new))
    return dict(b.raw, input=new)
