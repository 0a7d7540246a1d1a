"""Message model: tool-call pairing for OpenAI and Anthropic shapes, validation, repair.

Stateless helpers. A *group* is the unit that must never be split: an assistant message
that issues tool calls together with the messages that answer them (OpenAI ``tool`` rows,
or the Anthropic user message carrying ``tool_result`` blocks), or any single other message.
"""

from __future__ import annotations

import json
from typing import Any, Dict, Iterable, List, Optional, Sequence, Set, Tuple

from .provenance import Seal

Message = Dict[str, Any]

HISTORY_TAG = "history_task_context"
NOTICE_MARK = "[tencentdb-offload]"      # how our notices read; never how they are recognised
TRIM_MARK = "characters trimmed by tencentdb-offload"

# --- shape helpers -----------------------------------------------------------------

def role(msg: Any) -> str:
    return msg.get("role", "") if isinstance(msg, dict) else ""


def calls_of(msg: Message) -> List[str]:
    """Tool-call ids an assistant message issues (OpenAI tool_calls or Anthropic tool_use)."""
    if msg.get("role") != "assistant" if isinstance(msg, dict) else True:
        return []
    ids: List[str] = []
    for call in msg.get("tool_calls") or ():
        if isinstance(call, dict) and call.get("id"):
            ids.append(str(call["id"]))
    content = msg.get("content")
    if isinstance(content, list):
        for block in content:
            if isinstance(block, dict) and block.get("type") == "tool_use" and block.get("id"):
                ids.append(str(block["id"]))
    return ids


def results_of(msg: Message) -> List[str]:
    """Tool-call ids a message answers (``tool`` role or Anthropic ``tool_result`` blocks)."""
    r = msg.get("role")
    if r == "tool":
        tid = msg.get("tool_call_id")
        return [str(tid)] if tid else [""]
    if r == "user":
        content = msg.get("content")
        if isinstance(content, list):
            return [str(b.get("tool_use_id", "")) for b in content
                    if isinstance(b, dict) and b.get("type") == "tool_result"]
    return []


def is_tool_result(msg: Message) -> bool:
    """True for messages that only carry tool results."""
    r = msg.get("role") if isinstance(msg, dict) else None
    if r == "tool":
        return True
    content = msg.get("content") if r == "user" else None
    return (isinstance(content, list) and bool(content) and
            all(isinstance(b, dict) and b.get("type") == "tool_result" for b in content))


def is_plugin_text(text: Any, seal: Optional[Seal]) -> bool:
    """Text this plugin wrote as a whole message (a notice, digest, trim or summary sealed with
    ``seal.seal_text``): only a verifying seal says so, never a prefix. No seal: nothing is."""
    return seal is not None and isinstance(text, str) and seal.open_text(text) is not None


def is_plugin_message(msg: Any, seal: Optional[Seal]) -> bool:
    """A user or assistant message that is exactly one of our sealed texts."""
    return role(msg) in ("user", "assistant") and is_plugin_text(text_of(msg), seal)


def is_real_user(msg: Message, seal: Optional[Seal] = None) -> bool:
    """A user turn written by a person (not only tool results, not our sealed notice)."""
    if msg.get("role") != "user" or is_tool_result(msg):
        return False
    return not is_plugin_message(msg, seal)


def newest_real_user(messages: Sequence[Any], default: int = -1,
                     seal: Optional[Seal] = None) -> int:
    """Index of the newest real user message (the current turn), found from the end."""
    return next((i for i in range(len(messages) - 1, -1, -1)
                 if isinstance(messages[i], dict) and is_real_user(messages[i], seal)), default)


def text_of(msg: Message) -> str:
    """All text a message carries, for search, archive and size decisions."""
    content = msg.get("content") if isinstance(msg, dict) else None
    parts: List[str] = []
    _collect_text(content, parts)
    for call in msg.get("tool_calls") or () if isinstance(msg, dict) else ():
        fn = call.get("function") if isinstance(call, dict) else None
        if isinstance(fn, dict):
            parts.append("%s(%s)" % (fn.get("name", ""), _as_text(fn.get("arguments", ""))))
    return "\n".join(p for p in parts if p)


def _collect_text(content: Any, parts: List[str]) -> None:
    if isinstance(content, str):
        parts.append(content)
    elif isinstance(content, list):
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, dict):
                if isinstance(block.get("text"), str):
                    parts.append(block["text"])
                if block.get("type") == "tool_use":
                    parts.append("%s(%s)" % (block.get("name", ""), _as_text(block.get("input"))))
                if block.get("type") == "tool_result":
                    _collect_text(block.get("content"), parts)


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(value)


def tool_results(msg: Message):
    """(tool_call_id, result text) for every tool result a message carries."""
    if role(msg) == "tool":
        content = msg.get("content")
        yield str(msg.get("tool_call_id", "")), content if isinstance(content, str) else text_of(msg)
        return
    if role(msg) != "user" or not isinstance(msg.get("content"), list):
        return
    for b in msg["content"]:
        if isinstance(b, dict) and b.get("type") == "tool_result":
            yield str(b.get("tool_use_id", "")), text_of({"content": b.get("content")})


def call_args(msg: Message) -> Dict[str, Tuple[str, str]]:
    """tool_call_id -> (tool name, arguments text) for the calls an assistant issues."""
    out: Dict[str, Tuple[str, str]] = {}
    for call in msg.get("tool_calls") or ():
        if isinstance(call, dict) and call.get("id"):
            fn = call.get("function") or {}
            out[str(call["id"])] = (str(fn.get("name", "")), _as_text(fn.get("arguments", "")))
    content = msg.get("content")
    if isinstance(content, list):
        for b in content:
            if isinstance(b, dict) and b.get("type") == "tool_use" and b.get("id"):
                out[str(b["id"])] = (str(b.get("name", "")), _as_text(b.get("input")))
    return out


# --- groups --------------------------------------------------------------------------

def group_spans(messages: Sequence[Message]) -> List[Tuple[int, int]]:
    """Half-open spans [start, end) of unsplittable groups, in order, covering the list."""
    spans: List[Tuple[int, int]] = []
    i, n = 0, len(messages)
    while i < n:
        calls = calls_of(messages[i])
        j = i + 1
        if calls:
            pending = set(calls)
            while j < n and pending and is_tool_result(messages[j]):
                pending.difference_update(results_of(messages[j]))
                j += 1
        spans.append((i, j))
        i = j
    return spans


# --- content rewriting ---------------------------------------------------------------

def fresh(m: Message) -> Message:
    """A new dict without host/Gateway ``_`` markers (``_db_persisted`` included)."""
    return {k: v for k, v in m.items() if not k.startswith("_")}


def with_content(msg: Message, content: Any) -> Message:
    """A copy of ``msg`` with new content; the host's ``api_content`` bytes no longer apply."""
    out = {k: v for k, v in msg.items() if k != "api_content" and not k.startswith("_")}
    out["content"] = content
    return out


def trim_text(text: str, limit: int, pointer: str) -> str:
    """Head and tail of ``text`` within about ``limit`` chars, with a pointer to the rest."""
    if len(text) <= limit or (TRIM_MARK in text and len(text) <= 2 * limit):
        return text            # already trimmed: trimming is idempotent
    marker = "\n\n[... %d %s; %s ...]\n\n" % (len(text), TRIM_MARK, pointer)
    room = max(limit // 2, limit - len(marker))
    head, tail = max(1, room * 2 // 3), max(1, room - max(1, room * 2 // 3))
    marker = marker.replace(str(len(text)), str(len(text) - head - tail), 1)
    return text[:head] + marker + text[-tail:]


# --- repair --------------------------------------------------------------------------

class RepairReport(dict):
    """Counts of what ``repair`` changed (a dict so it serialises into status)."""

    def add(self, key: str, n: int = 1) -> None:
        if n:
            self[key] = self.get(key, 0) + n


def repair(messages: Iterable[Any], report: Optional[RepairReport] = None) -> List[Message]:
    """A valid provider sequence from ``messages``.

    System messages first; ``_``-prefixed markers removed; tool results without a call in
    the group before them dropped; calls without a result removed (the assistant too when
    nothing is left); consecutive user / assistant messages merged as the host would.
    """
    rep = report if report is not None else RepairReport()
    clean: List[Message] = []
    for m in messages:
        if not isinstance(m, dict) or not isinstance(m.get("role"), str) or not m.get("role"):
            rep.add("dropped_unknown")
            continue
        if any(k.startswith("_") for k in m):
            m = {k: v for k, v in m.items() if not k.startswith("_")}
            rep.add("markers_stripped")
        clean.append(m)
    systems = [m for m in clean if m["role"] == "system"]
    rest = [m for m in clean if m["role"] != "system"]
    if systems and clean[:len(systems)] != systems:
        rep.add("system_moved")
    paired = _repair_pairs(rest, rep)
    merged = _merge_same_roles(paired, rep)
    return systems + merged


def _repair_pairs(msgs: List[Message], rep: RepairReport) -> List[Message]:
    out: List[Message] = []
    i, n = 0, len(msgs)
    while i < n:
        m = msgs[i]
        calls = calls_of(m)
        if not calls:
            if is_tool_result(m) or (m["role"] == "user" and results_of(m)):
                fixed = _drop_result_blocks(m, set(), rep)
                if fixed is not None:
                    out.append(fixed)
            else:
                out.append(m)
            i += 1
            continue
        # collect the answers that follow this assistant
        j = i + 1
        answered: Set[str] = set()
        followers: List[Message] = []
        while j < n and (is_tool_result(msgs[j]) or
                         (msgs[j]["role"] == "user" and results_of(msgs[j]) and
                          not followers)):
            followers.append(msgs[j])
            answered.update(results_of(msgs[j]))
            j += 1
        keep_calls = [c for c in calls if c in answered]
        assistant = _keep_calls(m, set(keep_calls), rep)
        if assistant is not None:
            out.append(assistant)
        seen: Set[str] = set()
        allowed = set(keep_calls) if assistant is not None else set()
        for f in followers:
            fixed = _drop_result_blocks(f, allowed - seen, rep)
            if fixed is not None:
                seen.update(results_of(fixed))
                out.append(fixed)
        i = j
    return out


def _keep_calls(msg: Message, keep: Set[str], rep: RepairReport) -> Optional[Message]:
    calls = calls_of(msg)
    if all(c in keep for c in calls):
        return msg
    rep.add("unanswered_calls_removed", sum(1 for c in calls if c not in keep))
    out = {k: v for k, v in msg.items() if k != "api_content"}
    if msg.get("tool_calls"):
        tcs = [c for c in msg["tool_calls"] if isinstance(c, dict) and str(c.get("id")) in keep]
        if tcs:
            out["tool_calls"] = tcs
        else:
            out.pop("tool_calls", None)
    content = msg.get("content")
    if isinstance(content, list):
        content = [b for b in content if not (isinstance(b, dict) and b.get("type") == "tool_use"
                                              and str(b.get("id")) not in keep)]
        out["content"] = content
    if out.get("tool_calls") or calls_of(out):
        return out
    if _has_text(out.get("content")):
        return out
    rep.add("empty_assistants_dropped")
    return None


def _drop_result_blocks(msg: Message, allowed: Set[str], rep: RepairReport) -> Optional[Message]:
    """Keep only results answering ``allowed`` ids (each once); None when nothing is left."""
    if role(msg) == "tool":
        if str(msg.get("tool_call_id")) in allowed:
            return msg
        rep.add("orphan_results_dropped")
        return None
    content = msg.get("content")
    kept, dropped, used = [], 0, set()
    for b in content:
        if isinstance(b, dict) and b.get("type") == "tool_result":
            tid = str(b.get("tool_use_id"))
            if tid not in allowed or tid in used:
                dropped += 1
                continue
            used.add(tid)
        kept.append(b)
    if not dropped:
        return msg
    rep.add("orphan_results_dropped", dropped)
    if not kept:
        return None
    return with_content(msg, kept)


def _has_text(content: Any) -> bool:
    if isinstance(content, str):
        return bool(content.strip())
    if isinstance(content, list):
        return any(not (isinstance(b, dict) and b.get("type") == "text" and not str(b.get("text", "")).strip())
                   for b in content)
    return False


def _merge_same_roles(msgs: List[Message], rep: RepairReport) -> List[Message]:
    out: List[Message] = []
    for m in msgs:
        prev = out[-1] if out else None
        r = m["role"]
        if prev is not None and prev["role"] == r and r in ("user", "assistant") \
                and not calls_of(prev) and not is_tool_result(prev) and not is_tool_result(m):
            out[-1] = merge_two(prev, m)
            rep.add("same_role_merged")
            continue
        out.append(m)
    return out


def merge_two(first: Message, second: Message) -> Message:
    """One message holding both contents (second's tool calls kept)."""
    a, b = first.get("content"), second.get("content")
    if isinstance(a, str) and isinstance(b, str) or a is None or b is None:
        joined: Any = "\n\n".join(x for x in (a or "", b or "") if x)
    else:
        joined = _as_blocks(a) + _as_blocks(b)
    out = with_content(second, joined)
    return out


def _as_blocks(content: Any) -> List[Any]:
    if isinstance(content, list):
        return list(content)
    if content:
        return [{"type": "text", "text": str(content)}]
    return []


def validation_errors(messages: Sequence[Message]) -> List[str]:
    """Why ``messages`` is not a valid provider sequence (empty list: it is)."""
    errors: List[str] = []
    if not messages:
        return ["empty"]
    seen_other = False
    open_calls: Set[str] = set()
    prev = ""
    for idx, m in enumerate(messages):
        r = role(m)
        if r == "system":
            if seen_other:
                errors.append("%d: system after conversation" % idx)
            continue
        seen_other = True
        for tid in results_of(m):
            if tid not in open_calls:
                errors.append("%d: result %s answers no open call" % (idx, tid))
            open_calls.discard(tid)
        if not is_tool_result(m):
            if r == prev == "assistant":    # hosts merge these before a call, calls unioned
                open_calls |= set(calls_of(m))
                continue
            if open_calls:
                errors.append("%d: calls %s unanswered" % (idx, sorted(open_calls)))
            if r == prev == "user":
                errors.append("%d: two user messages in a row" % idx)
            open_calls = set(calls_of(m))
        prev = r if not is_tool_result(m) else "tool"
    if open_calls:
        errors.append("end: calls %s unanswered" % sorted(open_calls))
    return errors
