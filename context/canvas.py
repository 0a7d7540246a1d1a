"""The task canvas: the Gateway's Mermaid task map as one ``<current_task_context>`` block.

Everything about the block lives here: formatting it from a query-mmd answer, finding and
stripping blocks in messages (content and the host's ``api_content``), its digest, putting the
current one into a request once, and the guard that keeps at most one per request. Stateless:
which canvas is current, and which one a session was last shown, is session state.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any, Dict, List, Optional, Sequence, Tuple

from .messages import newest_real_user, text_of, with_content

Message = Dict[str, Any]

TAG = "current_task_context"
OPEN = "<" + TAG
_BLOCK_RE = re.compile(r"\s*<current_task_context>.*?</current_task_context>\s*", re.S)


def format_block(filename: str, content: str) -> str:
    """The block the model sees for one canvas file (goal first when the file names one)."""
    goal = ""
    first = content.split("\n", 1)[0]
    if first.startswith("%%{"):
        try:
            goal = str(json.loads(first.strip()[2:-2]).get("taskGoal") or "")
        except (ValueError, AttributeError):
            goal = ""
    lines = ["<current_task_context>",
             "Task canvas kept by the TencentDB memory Gateway: your recorded progress on the "
             "current task. Nodes marked \"doing\" are the current focus, \"done\" are finished. "
             "Use it to keep direction and avoid repeating finished work."]
    if goal:
        lines.append("Goal: " + goal)
    lines += ["File: " + filename, "```mermaid", content.strip(), "```", "</current_task_context>"]
    return "\n".join(lines)


def digest(text: str) -> str:
    return hashlib.md5(text.encode("utf-8", "surrogatepass")).hexdigest()


def strip(text: str) -> Tuple[str, int]:
    """Remove every block; returns (text, blocks removed)."""
    if OPEN not in text:
        return text, 0
    out, n = _BLOCK_RE.subn("\n\n", text)
    return out.strip("\n") if n else text, n


def blocks(text: str) -> List[str]:
    if OPEN not in text:
        return []
    return [m.group(0).strip() for m in _BLOCK_RE.finditer(text)]


def holds_block(msg: Any) -> bool:
    return isinstance(msg, dict) and msg.get("role") == "user" and OPEN in text_of(msg)


def strip_from(msg: Message) -> Tuple[Optional[Message], int]:
    """A message without canvas blocks (None if nothing else was left), and the count.

    Canvases only ever live in user messages (our injection, the Gateway's insertion)."""
    if msg.get("role") != "user":
        return msg, 0
    removed = 0
    content = msg.get("content")
    new_content: Any = content
    if isinstance(content, str):
        new_content, removed = strip(content)
    elif isinstance(content, list):
        parts = []
        for b in content:
            if isinstance(b, dict) and isinstance(b.get("text"), str):
                t, n = strip(b["text"])
                removed += n
                if n and not t.strip():
                    continue
                parts.append(dict(b, text=t) if n else b)
            else:
                parts.append(b)
        new_content = parts
    api = msg.get("api_content")
    api_removed = 0
    if isinstance(api, str):
        api_new, api_removed = strip(api)
    if not removed and not api_removed:
        return msg, 0
    if removed:
        if (isinstance(new_content, str) and not new_content.strip()) or new_content == []:
            return None, removed + api_removed
        out = with_content(msg, new_content)
    else:
        out = dict(msg)
    if api_removed and not removed:
        # Only the persisted injection held a canvas: keep the rest of the sidecar.
        out["api_content"] = api_new
    return out, removed + api_removed


def strip_all(messages: Sequence[Any]) -> Tuple[List[Any], int]:
    """Every message without canvas blocks (messages left empty are dropped), and the count."""
    out: List[Any] = []
    removed = 0
    for m in messages:
        fixed, n = strip_from(m) if isinstance(m, dict) else (m, 0)
        removed += n
        if fixed is not None:
            out.append(fixed)
    return out, removed


def append_text(content: Any, text: str) -> Any:
    if isinstance(content, list):
        return list(content) + [{"type": "text", "text": text}]
    base = content if isinstance(content, str) else ""
    return (base + "\n\n" + text) if base else text


def inject(messages: List[Message], block: str) -> List[Message]:
    """``messages`` with ``block`` appended to the newest real user message (a new list; the
    same list when there is no such message)."""
    idx = newest_real_user(messages)
    if idx < 0 or not block:
        return messages
    out = list(messages)
    out[idx] = with_content(messages[idx], append_text(messages[idx].get("content"), block))
    return out


def keep_newest(messages: List[Message]) -> Tuple[Optional[List[Message]], int]:
    """The request guard: at most one block per request, the newest, where it was.

    Returns (new list, blocks removed), or (None, 0) when the request is already fine."""
    holders = [i for i, m in enumerate(messages) if holds_block(m)]
    if not holders:
        return None, 0
    newest = holders[-1]
    found = blocks(text_of(messages[newest]))
    if len(holders) == 1 and len(found) <= 1:
        return None, 0
    removed = 0
    out = list(messages)
    for i in holders:
        fixed, n = strip_from(messages[i])
        removed += n
        out[i] = fixed if fixed is not None else {"role": "user", "content": "(context)"}
    out[newest] = with_content(out[newest], append_text(out[newest].get("content"), found[-1]))
    return out, max(0, removed - 1)


def for_request(messages: List[Message], block: str) -> Tuple[Optional[List[Message]], int]:
    """A request with exactly the current block once (stale ones removed), or (None, 0) when
    there is nothing to do; and how many stale blocks went."""
    stale = any(holds_block(m) for m in messages)
    if not block and not stale:
        return None, 0
    out, removed = strip_all(messages) if stale else (messages, 0)
    return (inject(out, block) if block else out), removed
