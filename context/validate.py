"""The one judge of a provider request: each message well formed, and the sequence valid.

Used by the product (a Gateway reply is checked with ``message_problem`` before any repair),
by ``demo``/``replay`` (every request the driver builds) and by the tests (the e2e harness's
wire validator is this one), so a sequence reads valid or invalid the same everywhere.

Shape: a role a provider knows, content that is text, null (assistant/system) or a list of
typed blocks, tool calls with an id and a named function, a ``tool`` message with its id.
Sequence: system (or developer) messages first; every call answered by the results right
after it, each once; no result without an open call; no two user turns in a row. Two
assistant turns in a row are valid: Hermes merges them before every provider call (their
calls unioned) or its Anthropic adapter does, and OpenAI-compatible APIs accept them.
"""

from __future__ import annotations

from typing import Any, List, Sequence, Set

from .blocks import Block, Kind, content_blocks, only_results, tool_results, use_ids

ROLES = ("system", "developer", "user", "assistant", "tool")
SYSTEM_ROLES = ("system", "developer")


def message_problem(m: Any, roles: Sequence[str] = ROLES) -> str:
    """"" when ``m`` is a well-formed message, else what is wrong, as a kind (never quoting
    its text): a reply's count of problems reads the same whatever the text was."""
    if not isinstance(m, dict):
        return "non-object messages"
    role = m.get("role")
    if role not in roles:
        return "messages with an invalid role"
    content = m.get("content")
    if content is None:
        if role not in ("assistant", "system", "developer"):
            return "%s messages without content" % role
    elif isinstance(content, list):
        if any(_block_problem(b, role) for b in content_blocks(content)):
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


def _block_problem(b: Block, role: str) -> bool:
    raw = b.raw
    if not isinstance(raw, dict) or not b.type:
        return True
    if b.kind is Kind.TEXT:
        return not isinstance(raw.get("text"), str)
    if b.kind is Kind.TOOL_USE:
        return (role != "assistant" or not isinstance(raw.get("id"), str)
                or not isinstance(raw.get("name"), str)
                or not isinstance(raw.get("input", {}), dict))
    if b.kind is Kind.TOOL_RESULT:
        return (role not in ("user", "tool") or not isinstance(raw.get("tool_use_id"), str)
                or not isinstance(raw.get("content", ""), (str, list, type(None))))
    return False            # images, thinking, documents: the host's own blocks, passed through


def validation_errors(messages: Sequence[Any]) -> List[str]:
    """Why ``messages`` is not a valid provider request (empty list: it is)."""
    if not messages:
        return ["empty"]
    errors = ["%d: %s" % (i, p) for i, p in enumerate(map(message_problem, messages)) if p]
    return errors + _sequence_errors([m if isinstance(m, dict) else {} for m in messages])


def _sequence_errors(messages: Sequence[dict]) -> List[str]:
    errors: List[str] = []
    seen_other = False
    open_calls: Set[str] = set()
    prev = ""
    for idx, m in enumerate(messages):
        r = m.get("role", "")
        if r in SYSTEM_ROLES:
            if seen_other:
                errors.append("%d: %s after conversation" % (idx, r))
            continue
        seen_other = True
        for b in tool_results(m):
            if b.id not in open_calls:
                errors.append("%d: result %s answers no open call" % (idx, b.id))
            open_calls.discard(b.id)
        if only_results(m):
            prev = "tool"
            continue
        calls = use_ids(m)
        if len(set(calls)) != len(calls):
            errors.append("%d: a call id repeated in one message" % idx)
        if r == prev == "assistant":    # hosts merge these before a call, calls unioned
            open_calls |= set(calls)
            continue
        if open_calls:
            errors.append("%d: calls %s unanswered" % (idx, sorted(open_calls)))
        if r == prev == "user":
            errors.append("%d: two user messages in a row" % idx)
        open_calls = set(calls)
        prev = r
    if open_calls:
        errors.append("end: calls %s unanswered" % sorted(open_calls))
    return errors
