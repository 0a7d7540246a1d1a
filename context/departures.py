"""What left the context in a compaction: compare the messages before and after by content.

A Gateway reply is made of new objects, so identity says nothing; content does. A tool result
counts as kept while a result with the same ``tool_call_id`` and text is still there (a reply
that rewrites a result, even to the same length, is a departure); any other message while its
text is. Stateless: the engine decides what to archive and records ids.
"""

from __future__ import annotations

from collections import Counter
from typing import AbstractSet, Any, Dict, Iterable, List, NamedTuple, Optional, Set, Tuple

from . import item_key, result_keys
from .blocks import Kind, blocks_of, text_parts
from .messages import (call_args, is_plugin_text, is_tool_result, results_of, role, text_of,
                       tool_results)
from .provenance import Seal

Message = Dict[str, Any]

# The Gateway's mild level replaces a tool result with a summary that starts like this.
OFFLOADED_MARK = "[Offloaded Tool Result"
SUMMARY_LABEL = "\nSummary: "
ARCHIVE_LINE = "\n原始工具结果已存档"           # "the original result is archived: tdai_read_cos(path=...)"
NO_SUMMARY = ("", "[L1 parse incomplete]")     # what the Gateway writes where its LLM gave none


class Departed(NamedTuple):
    kind: str                   # "tool_result" | "message"
    content: str
    tool_call_id: str = ""
    tool_name: str = ""
    role: str = ""
    args: Any = ""


class Departures(NamedTuple):
    items: List[Departed]        # full originals of what left (tool results and messages)
    left_ids: Set[str]           # tool_call_ids whose result is no longer in full in the context
    summarised_ids: Set[str]     # tool_call_ids now standing as a Gateway summary
    count: int                   # messages/results that left


def plain_text(m: Message) -> str:
    """A message's text; the content string itself when it is one (the usual case)."""
    content = m.get("content")
    if isinstance(content, str) and not m.get("tool_calls"):
        return content
    return text_of(m)


def own_text(m: Message) -> str:
    """A message's text without the tool results it carries (archived by their ids)."""
    if not results_of(m):
        return plain_text(m)
    return "\n".join(p for p in text_parts(b for b in blocks_of(m)
                                            if b.kind is not Kind.TOOL_RESULT) if p)


def call_arguments(messages: Iterable[Any]) -> Dict[str, Tuple[str, Any]]:
    """``tool_call_id`` → (tool name, arguments) for every call in ``messages``."""
    out: Dict[str, Tuple[str, Any]] = {}
    for m in messages:
        if isinstance(m, dict) and role(m) == "assistant":
            out.update(call_args(m))
    return out


def find(before: List[Message], after: List[Message], extra: List[Message] = (),
         seal: Optional[Seal] = None) -> Departures:
    """What of ``before`` is not in ``after``, plus the originals in ``extra`` (results the
    compaction had to cut before sending), each once. Our own sealed notices are not archived;
    everything else is, whatever it starts with."""
    kept_calls, summarised = set(), set()
    kept_text: Counter = Counter()      # copies: of a text said twice, one may leave
    for m in after:
        for tid, text in tool_results(m):
            kept_calls.add((tid, text))         # a set: compared by hash, then in full
            if text.startswith(OFFLOADED_MARK):
                summarised.add(tid)
        if not is_tool_result(m):
            kept_text[own_text(m)] += 1
    args = call_arguments(before)
    items: List[Departed] = []
    left: Set[str] = set()
    count = 0
    for m in before:
        if not isinstance(m, dict):
            continue
        # results by their id, also beside the user's own text in one message (Anthropic)
        for tid, text in tool_results(m):
            if (tid, text) in kept_calls:
                continue
            count += 1
            left.add(tid)
            name, call_args = args.get(tid, ("", ""))
            items.append(Departed("tool_result", text, tid, name, "tool", call_args))
        if not is_tool_result(m):
            text = own_text(m)
            if kept_text[text] > 0:
                kept_text[text] -= 1
            elif text and not is_plugin_text(text, seal):
                count += 1
                items.append(Departed("message", text, role=role(m)))
    for m in extra:
        for tid, text in tool_results(m):
            if tid not in left:
                name, call_args = args.get(tid, ("", ""))
                items.append(Departed("tool_result", text, tid, name, "tool", call_args))
                left.add(tid)
    return Departures(items, left, summarised, count)


def merged_only(before: List[Message], via: List[Message], after: List[Message],
                seal: Optional[Seal] = None) -> List[Departed]:
    """Messages of ``via`` (a Gateway reply, consecutive same-role messages merged by its
    repair) that left by ``after`` but were never in ``before``: the digest names them by their
    merged text, whose key nothing else archives (the originals are archived by theirs)."""
    had = {own_text(m) for m in before if isinstance(m, dict) and not is_tool_result(m)}
    return [d for d in find(via, after, seal=seal).items
            if d.kind == "message" and d.content not in had]


def read_keys(gone: Departures, reused: AbstractSet[str] = frozenset()) -> List[str]:
    """The keys ``tdai_read_cos`` reads what left back by (a tool result its
    ``tool_call_id``, or its ``result_keys`` key when the id is ``reused``; anything else its
    ``msg-`` key, as the archive shows them), in order."""
    keys: List[str] = []
    for d in gone.items:
        keys.append(result_keys.key_of(d.tool_call_id, d.content, reused)
                    if d.kind == "tool_result" and d.tool_call_id
                    else item_key.message_key(d.role, d.content))
    listed = set(keys)
    keys += sorted(t for t in gone.left_ids if t not in listed)  # archived when they arrived
    return keys


def gateway_summaries(messages: List[Message]) -> Dict[str, str]:
    """``tool_call_id`` → the Gateway's summary, for results it replaced in ``messages``: the
    summary itself, without the Gateway's header and archive line around it (a digest line
    showed the header, "[Offloaded Tool Result | node: N/A]", as the summary). A result it
    replaced with no summary (its LLM missed it) has none."""
    found = {}
    for m in messages:
        if not is_tool_result(m):
            continue
        for tid, text in tool_results(m):
            summary = _summary_in(text) if text.startswith(OFFLOADED_MARK) else ""
            if summary:
                found[tid] = summary
    return found


def _summary_in(text: str) -> str:
    """The summary of the Gateway's replacement text (gateway contract §4, mild level):
    "[Offloaded Tool Result | node: ...]\nSummary: <summary>[\n<archive line>]"."""
    _, sep, rest = text.partition(SUMMARY_LABEL)
    if not sep:
        return ""
    summary = " ".join(rest.split(ARCHIVE_LINE, 1)[0].split())
    return "" if summary in NO_SUMMARY else summary
