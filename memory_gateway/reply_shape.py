"""Which messages a /compact reply may contain: the shapes a provider request accepts.

A reply is checked before any repair. Roles other than user / assistant / tool / system
(``developer``, ``function``, made-up ones), content that is neither text, null nor a list of
typed blocks, and tool calls without an id or a named function are refused: repairing a
message we cannot read would guess, and local compaction is always available.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, List

ROLES = ("system", "user", "assistant", "tool")


def shape_problems(reply: List[Any]) -> str:
    """"" when every message is well formed, else a short count of what is wrong
    (kinds only: the reply's text is never quoted)."""
    found: Counter = Counter()
    for m in reply:
        problem = _problem(m)
        if problem:
            found[problem] += 1
    return ", ".join("%d %s" % (n, what) for what, n in sorted(found.items()))


def _problem(m: Any) -> str:
    if not isinstance(m, dict):
        return "non-object messages"
    role = m.get("role")
    if role not in ROLES:
        return "messages with an invalid role"
    content = m.get("content")
    if content is None:
        if role not in ("assistant", "system"):
            return "%s messages without content" % role
    elif isinstance(content, list):
        if any(_block_problem(b, role) for b in content):
            return "%s messages with invalid content blocks" % role
    elif not isinstance(content, str):
        return "%s messages with non-text content" % role
    if "tool_calls" in m and m["tool_calls"] is not None:
        calls = m["tool_calls"]
        if role != "assistant" or not isinstance(calls, list) or not all(map(_call_ok, calls)):
            return "messages with invalid tool_calls"
    if role == "tool" and not (isinstance(m.get("tool_call_id"), str) and m["tool_call_id"]):
        return "tool messages without a tool_call_id"
    return ""


def _call_ok(call: Any) -> bool:
    if not isinstance(call, dict) or not isinstance(call.get("id"), str) or not call["id"]:
        return False
    fn = call.get("function")
    return (isinstance(fn, dict) and isinstance(fn.get("name"), str) and bool(fn["name"])
            and isinstance(fn.get("arguments", ""), (str, dict))
            and call.get("type", "function") == "function")


def _block_problem(block: Any, role: str) -> bool:
    if not isinstance(block, dict) or not isinstance(block.get("type"), str):
        return True
    kind = block["type"]
    if kind == "text":
        return not isinstance(block.get("text"), str)
    if kind == "tool_use":
        return (role != "assistant" or not isinstance(block.get("id"), str)
                or not isinstance(block.get("name"), str)
                or not isinstance(block.get("input", {}), dict))
    if kind == "tool_result":
        return (role not in ("user", "tool") or not isinstance(block.get("tool_use_id"), str)
                or not isinstance(block.get("content", ""), (str, list, type(None))))
    return False            # images, thinking, documents: the host's own blocks, passed through
