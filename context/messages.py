"""Message model: tool-call pairing for OpenAI and Anthropic shapes, and repair.

Stateless helpers over the one block vocabulary (``blocks``); a request is judged by the one
validator (``validate.validation_errors``, re-exported here). A *group* is the unit that must
never be split: an assistant message that issues tool calls together with the messages that
answer them (OpenAI ``tool`` rows, or the Anthropic user message carrying ``tool_result``
blocks), or any single other message.
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Optional, Sequence, Set, Tuple

from . import blocks
from .provenance import Seal
from .validate import validation_errors  # noqa: F401  (the one validator, re-exported)

Message = Dict[str, Any]

HISTORY_TAG = "history_task_context"
NOTICE_MARK = "[tencentdb-offload]"      # how our notices read; never how they are recognised
TRIM_MARK = "characters trimmed by tencentdb-offload"

# --- shape helpers -----------------------------------------------------------------

def role(msg: Any) -> str:
    r = msg.get("role") if isinstance(msg, dict) else None
    return r if isinstance(r, str) else ""     # a None or numeric role reads as no role


def calls_of(msg: Message) -> List[str]:
    """Tool-call ids an assistant message issues (OpenAI tool_calls or Anthropic tool_use)."""
    return blocks.use_ids(msg)


def results_of(msg: Message) -> List[str]:
    """Tool-call ids a message answers (``tool`` role or Anthropic ``tool_result`` blocks)."""
    return blocks.result_ids(msg)


is_tool_result = blocks.only_results       # True for messages that only carry tool results


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
    return "\n".join(p for p in blocks.text_parts(blocks.blocks_of(msg)) if p)


def tool_results(msg: Message):
    """(tool_call_id, result text) for every tool result a message carries."""
    for b in blocks.tool_results(msg):
        yield b.id, b.text


def call_args(msg: Message) -> Dict[str, Tuple[str, str]]:
    """tool_call_id -> (tool name, arguments text) for the calls an assistant issues."""
    return {b.id: (b.name, blocks.as_text(b.args)) for b in blocks.tool_uses(msg)}


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


def leading_systems(messages: Sequence[Any]) -> int:
    """How many system messages open the list (the system prompt: it stays as it is)."""
    return next((i for i, m in enumerate(messages) if role(m) != "system"), len(messages))


# --- content rewriting ---------------------------------------------------------------

def fresh(m: Message) -> Message:
    """A new dict without host/Gateway ``_`` markers (``_db_persisted`` included)."""
    return {k: v for k, v in m.items() if not k.startswith("_")}


def _stamp(msg: Any) -> Optional[float]:
    raw = msg.get("timestamp") if isinstance(msg, dict) else None
    return raw if isinstance(raw, (int, float)) and not isinstance(raw, bool) else None


def stored_in_order(messages: List[Any]) -> List[Any]:
    """``messages`` as a host that reloads a session by ``ORDER BY timestamp`` reads them back.

    Such a host writes each message with its ``timestamp`` (the time of the write when it has
    none) and a later process reloads the session sorted by it: a message we put in the list
    (the digest pair, a note, the canvas) came back behind the kept ones that carry their
    original time, so the next turn's request no longer started with the compacted prefix
    (a full cache break). Every message that has a stamped one after it gets a stamp no
    earlier than the one before it (copies; a message already in order is the same object);
    the ones after the last stamp are written later anyway. Non-numeric stamps: unchanged."""
    stamps = [_stamp(m) for m in messages]
    if not any(s is not None for s in stamps) or any(
            isinstance(m, dict) and m.get("timestamp") is not None and s is None
            for m, s in zip(messages, stamps)):
        return messages
    last_stamped = max(i for i, s in enumerate(stamps) if s is not None)
    floor = next(s for s in stamps if s is not None)
    out: List[Any] = []
    for i, (m, s) in enumerate(zip(messages, stamps)):
        if isinstance(m, dict) and (s < floor if s is not None else i < last_stamped):
            m = dict(m, timestamp=floor)
        elif s is not None:
            floor = s
        out.append(m)
    return out


def with_content(msg: Message, content: Any) -> Message:
    """A copy of ``msg`` with new content; the host's ``api_content`` bytes no longer apply."""
    out = {k: v for k, v in msg.items() if k != "api_content" and not k.startswith("_")}
    out["content"] = content
    return out


def trim_text(text: str, limit: int, pointer: str) -> str:
    """Head and tail of ``text`` within about ``limit`` chars, with a pointer to the rest."""
    marker = "\n\n[... %d %s; %s ...]\n\n" % (len(text), TRIM_MARK, pointer)
    if len(text) <= limit or (TRIM_MARK in text and len(text) <= limit + len(marker)):
        # already trimmed (ours is at most that long): idempotent. Text that merely quotes
        # our mark is trimmed like any other once it is longer than that.
        return text
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
    nothing is left); consecutive user / assistant messages merged as the host would, but
    never into the current user turn (``_merge_same_roles``).
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
        tcs = [b.raw for b in blocks.call_blocks(msg["tool_calls"])
               if b.kind is blocks.Kind.TOOL_USE and b.id in keep]
        if tcs:
            out["tool_calls"] = tcs
        else:
            out.pop("tool_calls", None)
    content = msg.get("content")
    if isinstance(content, list):
        out["content"] = [b.raw for b in blocks.content_blocks(content)
                          if not (b.kind is blocks.Kind.TOOL_USE and b.id not in keep)]
    if out.get("tool_calls") or calls_of(out):
        return out
    if _has_text(out.get("content")):
        return out
    rep.add("empty_assistants_dropped")
    return None


def _drop_result_blocks(msg: Message, allowed: Set[str], rep: RepairReport) -> Optional[Message]:
    """Keep only results answering ``allowed`` ids (each once); None when nothing is left."""
    if role(msg) == "tool":
        if results_of(msg)[0] in allowed:
            return msg
        rep.add("orphan_results_dropped")
        return None
    kept, dropped, used = [], 0, set()
    for b in blocks.content_blocks(msg.get("content")):
        if b.kind is blocks.Kind.TOOL_RESULT:
            if b.id not in allowed or b.id in used:
                dropped += 1
                continue
            used.add(b.id)
        kept.append(b.raw)
    if not dropped:
        return msg
    rep.add("orphan_results_dropped", dropped)
    if not kept:
        return None
    return with_content(msg, kept)


def _has_text(content: Any) -> bool:
    if isinstance(content, str):
        return bool(content.strip())
    if isinstance(content, list):       # any block but a blank text block is something to say
        return any(not (b.kind is blocks.Kind.TEXT and isinstance(b.raw, dict)
                        and not b.text.strip())
                   for b in blocks.content_blocks(content))
    return False


BRIDGE_TEXT = ("%s The turns between the request above and the next one left the context."
               % NOTICE_MARK)


def _merge_same_roles(msgs: List[Message], rep: RepairReport) -> List[Message]:
    """Consecutive user (or assistant) messages as one, except the current user turn: nothing
    is ever glued into the user's own newest words; a short assistant line keeps an older
    request apart from it instead (the host would merge two user turns in a row itself)."""
    current = next((i for i in range(len(msgs) - 1, -1, -1)
                    if msgs[i]["role"] == "user" and not is_tool_result(msgs[i])), -1)
    out: List[Message] = []
    for i, m in enumerate(msgs):
        prev = out[-1] if out else None
        r = m["role"]
        if prev is not None and prev["role"] == r and r in ("user", "assistant") \
                and not calls_of(prev) and not is_tool_result(prev) and not is_tool_result(m):
            if i == current:
                out.append({"role": "assistant", "content": BRIDGE_TEXT})
                rep.add("current_turn_kept_apart")
            else:
                out[-1] = merge_two(prev, m)
                rep.add("same_role_merged")
                continue
        out.append(m)
    return out


def merge_two(first: Message, second: Message) -> Message:
    """One message holding both contents (second's tool calls kept)."""
    a, b = first.get("content"), second.get("content")
    # text joins text only: None beside a block list (or a number) becomes blocks
    if all(x is None or isinstance(x, str) for x in (a, b)):
        joined: Any = "\n\n".join(x for x in (a or "", b or "") if x)
    else:
        joined = blocks.as_blocks(a) + blocks.as_blocks(b)
    out = with_content(second, joined)
    return out
