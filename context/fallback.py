"""Local compaction: pair-aware tail truncation that always lands within the budget.

Keeps the system messages, the first ``keep_first`` messages (never splitting a group),
the current turn's user message and its newest step, then the newest groups that fit.
Tool results over ``trim_chars`` are trimmed to head + tail with a pointer to the archive;
if the must-keep part alone is over budget, trimming gets progressively harder. One notice
tells the model how much was archived and which tools read it back. No network, no state.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Set, Tuple

from . import messages as M
from .tokens import TokenMemo

Message = Dict[str, Any]
RECALL_HINT = "full text: tdai_read_cos(tool_call_id=\"%s\")"


@dataclass
class CompactResult:
    messages: List[Message]
    removed: List[Message] = field(default_factory=list)      # originals that left the context
    trimmed: List[Message] = field(default_factory=list)      # originals of trimmed messages
    tokens_before: int = 0
    tokens_after: int = 0
    within_budget: bool = True

    @property
    def changed(self) -> bool:
        return bool(self.removed or self.trimmed)


def drop_old_notices(messages: Sequence[Message]) -> List[Message]:
    """Our earlier notices are replaced, never archived or stacked."""
    return [m for m in messages if not (M.role(m) in ("user", "assistant")
                                        and M.text_of(m).startswith(M.NOTICE_MARK))]


def _shorter(text: str, tid: str, limit: int, summaries: Optional[Dict[str, str]]) -> str:
    hint = RECALL_HINT % tid
    summary = (summaries or {}).get(tid)
    if summary and len(summary) < len(text):     # the Gateway's L1 summary stands in
        return "%s Summary of an archived tool result: %s\n(%s)" % (M.NOTICE_MARK, summary, hint)
    return M.trim_text(text, limit, hint)


def trim_result(msg: Message, limit: int,
                summaries: Optional[Dict[str, str]] = None) -> Optional[Message]:
    """A copy of a tool-result message with results over ``limit`` chars replaced by their
    Gateway summary when ``summaries`` has one, else trimmed (None if nothing to do)."""
    if M.role(msg) == "tool":
        text = msg.get("content")
        if not isinstance(text, str):
            text = M.text_of(msg)
        if len(text) <= limit:
            return None
        return M.with_content(msg, _shorter(text, msg.get("tool_call_id", ""), limit, summaries))
    content = msg.get("content")
    if not isinstance(content, list):
        return None
    changed, blocks = False, []
    for b in content:
        if isinstance(b, dict) and b.get("type") == "tool_result":
            inner = M.text_of({"content": b.get("content")})
            if len(inner) > limit:
                b = dict(b, content=_shorter(inner, b.get("tool_use_id", ""), limit, summaries))
                changed = True
        blocks.append(b)
    return M.with_content(msg, blocks) if changed else None


def has_compressible(messages: Sequence[Message], keep_first: int, trim_chars: int) -> bool:
    """Something before the current turn that could leave, or a long result to trim."""
    current = M.newest_real_user(messages, default=0)
    head = sum(1 for m in messages[:current] if M.role(m) == "system") + keep_first
    return current > head or any(len(t) > trim_chars for m in messages[:current]
                                 if M.is_tool_result(m) for _tid, t in M.tool_results(m))


def prune_results(messages: Sequence[Message], *, protect_last: int, limit: int,
                  summaries: Optional[Dict[str, str]] = None) -> CompactResult:
    """The cheap step before a compaction: shorten old tool results in place (summary or
    trim with a recall pointer), leaving the newest ``protect_last`` messages and the current
    turn untouched. Nothing leaves the context; ``trimmed`` holds the originals. Untouched
    messages are the very same objects."""
    out = list(messages)
    current = M.newest_real_user(out, default=len(out))
    end = min(current, max(0, len(out) - max(0, protect_last)))
    trimmed: List[Message] = []
    for i in range(end):
        m = out[i]
        if isinstance(m, dict) and M.is_tool_result(m):
            short = trim_result(m, limit, summaries)
            if short is not None:
                trimmed.append(m)
                # the host's markers stay: 0.22 keeps the list and must not persist rows twice
                out[i] = dict({k: v for k, v in m.items() if k.startswith("_")}, **short)
    return CompactResult(out if trimmed else list(messages), trimmed=trimmed)


def trim_user(msg: Message, limit: int) -> Optional[Message]:
    text = M.text_of(msg)
    if len(text) <= limit:
        return None
    return M.with_content(msg, M.trim_text(text, limit, "full text: tdai_offload_search"))


def notice_text(removed: Sequence[Message], total_archived: int, recallable: bool = True) -> str:
    """The one line the model reads where messages left. It promises recall only when the
    archive is being written (``recallable``); otherwise it says the texts wait."""
    calls: List[Tuple[str, str]] = []
    for m in removed:
        for tid, (name, _args) in M.call_args(m).items():
            calls.append((tid, name))
    listed = ", ".join("%s (%s)" % c for c in calls[-12:])
    text = ("%s %d earlier message(s) were moved out of the context to keep it within budget "
            "(%d archived in this conversation so far). Nothing is lost: call "
            "tdai_offload_search(query) to find archived text, or tdai_read_cos(tool_call_id) "
            "to read an archived tool result in full."
            % (M.NOTICE_MARK, len(removed), max(total_archived, len(removed))))
    if not recallable:
        text = ("%s %d earlier message(s) were moved out of the context to keep it within budget. "
                "The archive cannot be written right now: their full texts are held and retried, "
                "and tdai_read_cos / tdai_offload_search can return them only once it recovers."
                % (M.NOTICE_MARK, len(removed)))
    if listed:
        text += " Tool calls moved out include: " + listed + "."
    return text


def _notice(text: str, prev: Optional[Message], nxt: Optional[Message]) -> Optional[Message]:
    """A notice whose role keeps roles alternating (None: caller merges it into ``nxt``)."""
    before = M.role(prev) if prev is not None else ""
    after = M.role(nxt) if nxt is not None else ""
    if prev is not None and M.calls_of(prev):
        return None                     # never between a call and its result
    for r in ("user", "assistant"):
        if r != before and r != after and not (r == "user" and nxt is not None
                                               and M.is_tool_result(nxt)):
            return {"role": r, "content": text}
    return None


def local_compact(messages: Sequence[Message], budget: int, *, keep_first: int = 3,
                  trim_chars: int = 2000, archived_total: int = 0, recallable: bool = True,
                  count: Optional[Callable[[Any], int]] = None) -> CompactResult:
    """Compact ``messages`` to at most ``budget`` estimated tokens (see module doc).

    ``count`` estimates one message (a memo shared with the caller saves repeated work)."""
    count = count or TokenMemo()
    src = M.repair(drop_old_notices(messages))
    before = sum(count(m) for m in messages)
    systems = [m for m in src if M.role(m) == "system"]
    body = [m for m in src if M.role(m) != "system"]
    removed: List[Message] = []
    trimmed: List[Message] = []

    # 1. heartbeat groups leave first (not the current turn's: the host appends the model's
    #    answer to it, and dropping its step would leave two assistant messages in a row)
    spans = M.group_spans(body)
    current = max((s for s, _e in spans if M.is_real_user(body[s])), default=len(body))
    kept_spans = []
    for s, e in spans:
        calls = M.call_args(body[s])
        if s < current and calls and all(M.is_heartbeat_call(n, a) for n, a in calls.values()):
            removed.extend(body[s:e])
        else:
            kept_spans.append((s, e))
    spans = kept_spans

    # 2. the must-keep parts: head, the current user message, the newest group
    last_user = max((i for i, (s, _e) in enumerate(spans) if M.is_real_user(body[s])), default=-1)
    head: List[int] = []
    head_len = 0
    for i, (s, e) in enumerate(spans):
        if (last_user >= 0 and i >= last_user) or head_len + (e - s) > keep_first:
            break
        head.append(i)
        head_len += e - s
    must: Set[int] = set(head)
    if last_user >= 0:
        must.add(last_user)
    if spans:
        must.add(len(spans) - 1)

    # 3. trimmed versions of every span (results outside the current turn trimmed first)
    versions: Dict[int, List[Message]] = {}
    cost: Dict[int, int] = {}

    def set_version(i: int, limit: Optional[int], users: bool = False) -> None:
        s, e = spans[i]
        out = []
        for m in body[s:e]:
            cut = None
            if limit is not None:
                cut = trim_result(m, limit) if M.is_tool_result(m) or M.results_of(m) else (
                    trim_user(m, limit) if users else None)
            out.append(cut if cut is not None else m)
        versions[i] = out
        cost[i] = sum(count(m) for m in out)

    for i in range(len(spans)):
        in_turn = last_user >= 0 and i >= last_user
        set_version(i, None if in_turn else trim_chars)

    sys_cost = sum(count(m) for m in systems)
    notice_cost = 120 + 12 * 12

    def must_cost() -> int:
        return sys_cost + notice_cost + sum(cost[i] for i in must)

    # 4. if the must-keep part is over budget: trim harder, step by step
    if must_cost() > budget:
        for i in must:
            set_version(i, trim_chars)
    for limit in (trim_chars // 2, trim_chars // 4, 300, 120):
        if must_cost() <= budget:
            break
        for i in must:
            set_version(i, limit, users=True)
    if must_cost() > budget:
        # keep only the current user message and the newest group
        for i in list(head):
            must.discard(i)
        head = []

    # 5. fill with the newest groups that fit (contiguous from the end)
    room = budget - must_cost()
    chosen = set(must)
    for i in range(len(spans) - 1, -1, -1):
        if i in chosen:
            continue
        if head and i <= head[-1]:
            break
        if cost[i] > room:
            break
        chosen.add(i)
        room -= cost[i]

    for i in range(len(spans)):
        s, e = spans[i]
        if i not in chosen:
            removed.extend(body[s:e])
        else:
            for orig, new in zip(body[s:e], versions[i]):
                if new is not orig:
                    trimmed.append(orig)

    if not removed and not trimmed:
        # nothing to do: the list as it was (earlier notice included), only made valid
        same = M.repair(messages)
        after = sum(count(m) for m in same)
        return CompactResult(same, [], [], before, after, after <= budget)

    # 6. assemble with one notice at the first gap
    out: List[Message] = list(systems)
    notice_done = not removed
    prev_kept = -1
    for i in range(len(spans)):
        if i not in chosen:
            continue
        if not notice_done and i != prev_kept + 1:
            _place_notice(out, versions[i], notice_text(removed, archived_total + len(removed), recallable))
            notice_done = True
        out.extend(versions[i])
        prev_kept = i
    if not notice_done:
        _place_notice(out, [], notice_text(removed, archived_total + len(removed), recallable))
    result = M.repair(out)
    if not [m for m in result if M.role(m) != "system"]:
        result = result + [{"role": "user", "content": notice_text(removed, archived_total, recallable)}]
    after = sum(count(m) for m in result)
    return CompactResult(result, removed, trimmed, before, after, after <= budget)


def _place_notice(out: List[Message], following: List[Message], text: str) -> None:
    prev = out[-1] if out and M.role(out[-1]) != "system" else None
    nxt = following[0] if following else None
    notice = _notice(text, prev, nxt)
    if notice is not None:
        out.append(notice)
    elif nxt is not None and not M.is_tool_result(nxt) and not M.calls_of(nxt):
        following[0] = M.merge_two({"role": nxt["role"], "content": text}, nxt)
    elif prev is not None and not M.calls_of(prev) and not M.is_tool_result(prev):
        out[-1] = M.merge_two(prev, {"role": prev["role"], "content": text})
