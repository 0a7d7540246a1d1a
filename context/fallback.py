"""Local compaction: pair-aware tail truncation that always lands within the budget.

Keeps the system messages, the first ``keep_first`` messages (never splitting a group),
the current turn's user message and its newest step, then the newest groups that fit; with
a focus (``/compress <focus>``, ``focus``) the matching groups come before the others.
Tool results over ``trim_chars`` are trimmed to head + tail with a pointer to the archive;
old call arguments too (``callargs``). If the must-keep part alone is over budget, trimming
gets progressively harder, the newest step's results trimmed as few as fit (``_tighten``).
Where messages leave, a sealed digest (``digest``) tells the model what they held and how to
read them back. Steps: plan the groups, price them against a
``Budget``, tighten, fill, assemble. No network, no state.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import AbstractSet, Any, Callable, Dict, List, Optional, Sequence, Set, Tuple

from . import blocks
from . import digest
from . import focus
from .messages import (NOTICE_MARK, call_args, calls_of, group_spans, is_real_user, is_tool_result,
                       newest_real_user, repair, results_of, role, text_of, tool_results,
                       trim_text, with_content)
from .heartbeat import is_heartbeat_call
from .callargs import args_key, trim_call_args
from . import item_key
from . import read_backs, result_keys
from .departures import Departed, plain_text
from .notes import Notes, carried
from .provenance import Seal
from .tokens import TokenMemo

Message = Dict[str, Any]
RECALL_HINT = "full text: tdai_read_cos(tool_call_id=\"%s\")"
HARDER = (2, 4)                    # trim_chars divisors when the must-keep part is over, then
FLOORS = (300, 120)                # these fixed limits


@dataclass(frozen=True)
class Budget:
    """What one compaction may cost. The flow sizes it from its target in provider tokens
    (``compaction.flow.plan_budget``); the local compaction prices its groups against it
    (``room``). Tokens are estimated tokens (``tokens``) unless they say provider tokens."""
    for_messages: int       # what the list itself (its system messages too) may take
    overhead: int = 0       # outside the list: system prompt, tool schemas
    target: int = 0         # provider tokens the request must land at or under
    before: int = 0         # provider tokens of the request before
    fixed: int = 0          # spent before any group is chosen: system messages, the
                            # earlier digests, the new digest's share
    ceiling: int = 0        # what the list may never pass (0: ``for_messages``)

    def room(self, must: int) -> int:
        return self.for_messages - self.fixed - must

    @property
    def hard_limit(self) -> int:
        return max(self.for_messages, self.ceiling)

    def hard_room(self, must: int) -> int:
        return self.hard_limit - self.fixed - must


@dataclass
class Plan:
    """The groups of one compaction, in one index space (``spans``)."""
    body: List[Message]
    spans: List[Tuple[int, int]]
    current: int                               # span of the current user message (-1: none)
    digests: List[int]                         # spans that are earlier digests (kept as sent)
    bodies: List[str]                          # their digest texts
    head: List[int] = field(default_factory=list)
    must: Set[int] = field(default_factory=set)
    versions: Dict[int, List[Message]] = field(default_factory=dict)
    cost: Dict[int, int] = field(default_factory=dict)
    args_cut: Dict[int, List[Tuple[str, str, str]]] = field(default_factory=dict)
    removed: List[Message] = field(default_factory=list)     # heartbeats: they leave first
    asked_back: Set[str] = field(default_factory=set)        # the current turn's recall reads
    unread: Set[str] = field(default_factory=set)            # the newest step's, not yet read
    reused: Set[str] = field(default_factory=set)            # call ids with several texts

    @property
    def whole_over_budget(self) -> Set[str]:
        """Results trimmed only past the hard limit, not the budget: what the model asked for
        in this turn and has not read (trimmed, it reads them again and pays twice)."""
        return self.asked_back | self.unread

    def messages(self, i: int) -> List[Message]:
        s, e = self.spans[i]
        return self.body[s:e]

    def must_cost(self) -> int:
        return sum(self.cost[i] for i in self.must)


@dataclass
class CompactResult:
    messages: List[Message]
    removed: List[Message] = field(default_factory=list)      # originals that left the context
    trimmed: List[Message] = field(default_factory=list)      # originals of trimmed messages
    tokens_before: int = 0
    tokens_after: int = 0
    within_budget: bool = True
    departed: List[Departed] = field(default_factory=list)   # trimmed call args, merged turns
    digest_collapsed: bool = False                           # earlier digests rebuilt (rare)
    notes_placed: bool = False                               # the notes are in the new digest

    @property
    def changed(self) -> bool:
        return bool(self.removed or self.trimmed)


def drop_old_notices(messages: Sequence[Message], seal: Seal) -> List[Message]:
    """Our earlier notices (sealed) are replaced, never archived or stacked; text that only
    looks like one is the user's and stays."""
    return [m for m in messages if not (role(m) in ("user", "assistant")
                                        and seal.is_ours(m.get("content"), "notice"))]


def _shorter(text: str, tid: str, limit: int, summaries: Optional[Dict[str, str]],
             seal: Optional[Seal] = None, reused: AbstractSet[str] = frozenset(),
             hint: str = "") -> str:
    """``text`` as it stays in the context: the Gateway's summary when known, else head + tail
    with a recall pointer; sealed when a ``seal`` is given. Our own trim is trimmed again from
    its body; our other texts (a summary, a digest) stay as they are. A ``reused`` call id
    points at its text's own key (``result_keys``)."""
    key = result_keys.key_of(tid, text, reused)
    opened = seal.open_text(text) if seal is not None else None
    if opened is not None:
        if opened[0] != "trim":
            return text
        text = opened[1]
    hint = hint or RECALL_HINT % key
    summary = (summaries or {}).get(tid)
    if summary and len(summary) < len(text):     # the Gateway's L1 summary stands in
        body = "%s Summary of an archived tool result: %s\n(%s)" % (NOTICE_MARK, summary, hint)
        return seal.seal_text("summary", body) if seal is not None else body
    short = trim_text(text, limit, hint)
    if seal is None or (opened is None and short == text):
        return short
    return seal.seal_text("trim", short)


def trim_result(msg: Message, limit: int, summaries: Optional[Dict[str, str]] = None,
                seal: Optional[Seal] = None, reused: AbstractSet[str] = frozenset(),
                hint: str = "") -> Optional[Message]:
    """A copy of a tool-result message with results over ``limit`` chars replaced by their
    Gateway summary when ``summaries`` has one, else trimmed (None if nothing to do); with a
    ``seal``, what the plugin wrote is sealed ("summary" / "trim"). ``hint`` replaces the
    recall pointer (a trim whose text the archive could not take promises none)."""
    if role(msg) == "tool":
        res = blocks.tool_results(msg)[0]
        short = _shorter(res.text, res.id, limit, summaries, seal, reused, hint)
        return None if len(res.text) <= limit or short == res.text else with_content(msg, short)
    content = msg.get("content")
    if not isinstance(content, list):
        return None
    changed, parts = False, []
    for b in blocks.content_blocks(content):
        raw = b.raw
        if b.kind is blocks.Kind.TOOL_RESULT:
            short = _shorter(b.text, b.id, limit, summaries, seal, reused, hint)
            if len(b.text) > limit and short != b.text:
                raw = dict(raw, content=short)
                changed = True
        parts.append(raw)
    return with_content(msg, parts) if changed else None


def has_compressible(messages: Sequence[Message], keep_first: int, trim_chars: int) -> bool:
    """Something before the current turn that could leave, or a long result to trim."""
    current = newest_real_user(messages, default=0)
    head = sum(1 for m in messages[:current] if role(m) == "system") + keep_first
    return current > head or any(len(t) > trim_chars for m in messages[:current]
                                 if is_tool_result(m) for _tid, t in tool_results(m))


def trim_user(msg: Message, limit: int) -> Optional[Message]:
    text = text_of(msg)
    if len(text) <= limit:
        return None
    key = item_key.message_key(role(msg), plain_text(msg))      # the archive's key for it
    return with_content(msg, trim_text(text, limit, 'full text: tdai_read_cos(key="%s")' % key))


# --- local compaction in steps: plan, price, tighten, fill, assemble ------------------------

def _plan(body: List[Message], keep_first: int, seal: Seal, reused: AbstractSet[str]) -> Plan:
    """Groups, earlier digests, the current turn; heartbeat groups before it leave first (not
    the current turn's: the host appends the model's answer to it)."""
    spans = group_spans(body)
    start = max((s for s, _e in spans if is_real_user(body[s], seal)), default=len(body))
    kept, removed = [], []
    for s, e in spans:
        calls = call_args(body[s])
        if s < start and calls and all(is_heartbeat_call(n, a) for n, a in calls.values()):
            removed.extend(body[s:e])
        else:
            kept.append((s, e))
    plan = Plan(body, kept, next((i for i, (s, _e) in enumerate(kept) if s == start), -1), [], [])
    for i, (s, e) in enumerate(kept):
        text = digest.body_of(body[s:e], seal) if i < plan.current or plan.current < 0 else None
        if text is not None:
            plan.digests.append(i)
            plan.bodies.append(text)
    plan.removed = removed
    plan.reused = set(reused) | result_keys.reused_in(body)
    if plan.current >= 0:
        plan.asked_back = read_backs.asked_back(body, seal)
    _choose_head(plan, keep_first)
    return plan


def _unread_limit(plan: Plan, unread: Set[str], budget: int, room: int, ceiling: int,
                  trigger: int, count: Callable[[Any], int]) -> int:
    """What keeping the newest step's ``unread`` results whole may bring the landing to over
    ``budget``: the ``room`` given them, the ``ceiling``, and room under the ``trigger`` for a
    step more of their size (0: no such limit). Sets ``plan.unread`` when it is over the
    budget; 0 otherwise."""
    if not unread:
        return 0
    size = sum(count(m) for m in plan.body if isinstance(m, dict) and unread.intersection(results_of(m)))
    limit = min([room] + [ceiling] * bool(ceiling) + [trigger - size] * bool(trigger))
    if limit <= budget:
        return 0
    plan.unread = unread
    return limit


def _choose_head(plan: Plan, keep_first: int) -> None:
    """The first groups up to ``keep_first`` messages, ending before the current turn, the
    first digest, and never on a plain assistant message (a digest call would merge into it)."""
    used = 0
    for i, (s, e) in enumerate(plan.spans):
        if i == plan.current or i in plan.digests or used + (e - s) > keep_first:
            break
        plan.head.append(i)
        used += e - s
    while plan.head and role(plan.body[plan.spans[plan.head[-1]][0]]) == "assistant" \
            and not calls_of(plan.body[plan.spans[plan.head[-1]][0]]):
        plan.head.pop()
    plan.must = set(plan.head)
    if plan.current >= 0:
        plan.must.add(plan.current)
    if plan.spans:
        plan.must.add(len(plan.spans) - 1)
    plan.must.difference_update(plan.digests)


def _set_version(plan: Plan, i: int, limit: Optional[int], users: bool = False, *,
                 count: Callable[[Any], int], seal: Seal, recallable: bool,
                 keep: Set[str] = frozenset()) -> None:
    """Group ``i`` as it would stay: results, call arguments (and, hardest, user text) over
    ``limit`` chars cut; ``None`` keeps it whole, and so are the results of the calls in
    ``keep``."""
    out, cut = [], []
    for m in plan.messages(i):
        new = None
        if limit is not None:
            if is_tool_result(m) or results_of(m):
                if keep.isdisjoint(results_of(m)):
                    new = trim_result(m, limit, seal=seal, reused=plan.reused)
            elif calls_of(m):
                shorter = trim_call_args(m, limit, recallable)
                if shorter is not None:
                    new, calls = shorter
                    cut.extend(calls)
            elif users and role(m) in ("user", "assistant"):   # hardest: their words too
                new = trim_user(m, limit)
        out.append(new if new is not None else m)
    plan.versions[i], plan.args_cut[i] = out, cut
    plan.cost[i] = sum(count(m) for m in out)


def _tighten(plan: Plan, budget: Budget, trim_chars: int, trim: Callable[..., None],
             count: Callable[[Any], int]) -> None:
    """When the must-keep part is over budget: trim it harder step by step, then let the
    head go (the current user message and the newest group always stay). The current user
    message is the user's own words, byte for byte: never trimmed, whatever it starts with.
    What the model asked to read back in this turn (``asked_back``), and the newest step's
    results it has not read when they may pass the budget (``unread``), are trimmed only past
    the hard limit: trimmed, a read-back would point back to itself, and either be read again."""
    _tighten_to(plan, budget.room, trim_chars, trim, plan.whole_over_budget, count)
    if plan.whole_over_budget and budget.hard_room(plan.must_cost()) < 0:
        _tighten_to(plan, budget.hard_room, trim_chars, trim, frozenset(), count)


def _tighten_to(plan: Plan, room: Callable[[int], int], trim_chars: int,
                trim: Callable[..., None], keep: Set[str], count: Callable[[Any], int]) -> None:
    trimmable = [i for i in plan.must if i != plan.current]
    newest = len(plan.spans) - 1
    if room(plan.must_cost()) < 0:
        for i in trimmable:
            if i != newest:
                trim(i, trim_chars, keep=keep)
        if newest in trimmable:
            keep = _trim_fewest(plan, newest, room, trim_chars, trim, keep, count)
    for limit in tuple(trim_chars // d for d in HARDER) + FLOORS:
        if room(plan.must_cost()) >= 0:
            return
        for i in trimmable:
            trim(i, limit, users=True, keep=keep)
    if room(plan.must_cost()) < 0:
        plan.must.difference_update(plan.head)
        plan.head = []


def _trim_fewest(plan: Plan, i: int, room: Callable[[int], int], trim_chars: int,
                 trim: Callable[..., None], keep: Set[str], count: Callable[[Any], int]) -> Set[str]:
    """The newest step's results (what the model asked for and has not read yet) trimmed as
    few as the room allows: each, newest first, stays whole if it still fits (trimming all of
    them for one over the line would hide every one). Returns the ids kept whole. One trim of
    the step, then each result's saving is priced alone (a step's cost is its messages' sum)."""
    trim(i, trim_chars, keep=keep)
    spare = room(plan.must_cost())
    whole = set(keep)
    for orig, now in reversed(list(zip(plan.messages(i), plan.versions[i]))):
        ids = results_of(orig)
        if now is orig or not ids:          # already whole, or not a result
            continue
        extra = count(orig) - count(now)
        if extra <= spare:
            spare -= extra
            whole.update(ids)
    trim(i, trim_chars, keep=whole)
    return whole


def _prefer(plan: Plan, room: int, topic: Any, trim: Callable[..., None],
            trim_chars: int) -> Set[int]:
    """The groups matching the focus ``topic``, newest first, within ``focus.SHARE`` of
    ``room``: whole when they fit, else trimmed as any old group is."""
    chosen: Set[int] = set()
    pattern = focus.pattern(topic)
    if pattern is None:
        return chosen
    spend = int(max(0, room) * focus.SHARE)
    last_head = plan.head[-1] if plan.head else -1
    for i in range(len(plan.spans) - 1, last_head, -1):
        if i in plan.must or i in plan.digests or not focus.matches(plan.messages(i), pattern):
            continue
        for limit in (None, trim_chars):
            trim(i, limit)
            if plan.cost[i] <= spend:
                chosen.add(i)
                spend -= plan.cost[i]
                break
    return chosen


def _fill(plan: Plan, budget: Budget, preferred: Set[int] = frozenset()) -> Set[int]:
    """The must-keep groups (and ``preferred``) plus the newest groups that fit, contiguous
    from the end."""
    room = budget.room(plan.must_cost()) - sum(plan.cost[i] for i in preferred)
    chosen = set(plan.must) | set(preferred)
    for i in range(len(plan.spans) - 1, -1, -1):
        if i in chosen or i in plan.digests:
            continue
        if (plan.head and i <= plan.head[-1]) or plan.cost[i] > room:
            break
        chosen.add(i)
        room -= plan.cost[i]
    return chosen


def _assemble(plan: Plan, chosen: Set[int], digest: List[Message], replaces: bool
              ) -> List[Message]:
    """Kept groups in their order; the new digest follows the earlier ones (or sits at the
    first gap); a collapsed digest takes the place of the earlier ones."""
    out: List[Message] = []
    placed = not digest
    anchor = plan.digests[-1] if plan.digests else -1
    gap = False
    for i in range(len(plan.spans)):
        if i in plan.digests:
            if not replaces:
                out.extend(plan.messages(i))
            if i == anchor and not placed:
                _put(out, digest)
                placed = True
            continue
        if i not in chosen:
            gap = True
            continue
        if gap and not placed and anchor < 0:
            _put(out, digest)
            placed = True
        out.extend(plan.versions[i])
    if not placed:
        _put(out, digest)
    return out


def _put(out: List[Message], digest: List[Message]) -> None:
    """Append the digest pair, before a plain assistant message if one ends ``out``: after it
    the call would be merged into that message (by us or the host) and lose its shape."""
    at = len(out)
    if out and role(out[-1]) == "assistant" and not calls_of(out[-1]):
        at -= 1
    out[at:at] = digest


def _digest_messages(plan: Plan) -> List[Message]:
    return [m for i in plan.digests for m in plan.messages(i)]


def _departed(plan: Plan, chosen: Set[int], messages: Sequence[Message],
              gone: List[Message]) -> List[Departed]:
    """Trimmed call arguments, and user messages made by merging two user turns in a row (as
    the host sends them): the digest and trims name the merged text's key, and departures
    archive only the originals, so the merged text is archived too."""
    own = {plain_text(m) for m in messages if isinstance(m, dict) and role(m) == "user"}
    merged = [plain_text(m) for m in gone if role(m) == "user" and not is_tool_result(m)]
    return [Departed("tool_args", full, args_key(tid), name, "assistant")
            for i in sorted(chosen) for tid, name, full in plan.args_cut.get(i, ())] + [
        Departed("message", text, role="user") for text in merged if text and text not in own]


def local_compact(messages: Sequence[Message], budget: int, *, keep_first: int = 3,
                  trim_chars: int = 2000, archived_total: int = 0, recallable: bool = True,
                  count: Optional[Callable[[Any], int]] = None, seal: Seal,
                  summaries: Optional[Dict[str, str]] = None,
                  digest_cap: Optional[int] = None, notes: Notes = Notes(),
                  focus: Sequence[str] = (), ceiling: int = 0, unread_room: int = 0,
                  trigger: int = 0, reused: AbstractSet[str] = frozenset()) -> CompactResult:
    """Compact ``messages`` to at most ``budget`` estimated tokens (see module doc).

    ``count`` estimates one message (a memo shared with the caller saves repeated work);
    ``seal`` signs what the plugin writes and finds the digest already sent (the runtime's:
    required, as a stand-in would not recognise what an earlier process wrote); ``summaries`` are the Gateway's
    L1 summaries by tool_call_id, shown in the digest for results that left; ``notes`` ride in
    the new digest section (the provider's text only while the kept messages lack it);
    groups matching the ``focus`` terms are kept before older ones (``focus``); what the model
    asked to read back in the current turn stays whole up to ``ceiling`` tokens, over ``budget``;
    the newest step's results it has not read yet up to ``unread_room`` (over ``budget``:
    trimmed only to reach the landing, they would be read again) while a step more of their
    size still fits under ``trigger`` (else the next step would compact again: one cache
    break more for them).
    ``archived_total`` is accepted for callers of the notice era; the digest lists ids."""
    count = count or TokenMemo()
    src = repair(drop_old_notices(messages, seal))
    before = sum(count(m) for m in messages)
    systems = [m for m in src if role(m) == "system"]
    plan = _plan([m for m in src if role(m) != "system"], keep_first, seal, reused)
    cap = digest_cap if digest_cap is not None else digest.budget_for(budget)
    earlier = sum(digest.tokens_of(b) for b in plan.bodies)
    hard = ceiling if plan.asked_back else 0
    if plan.current >= 0 and unread_room > budget:
        hard = max(hard, _unread_limit(plan, read_backs.unread(src, seal), budget,
                                       unread_room, ceiling, trigger, count))
    costs = Budget(budget, fixed=sum(count(m) for m in systems) + max(cap, earlier), ceiling=hard)

    allowed = costs.hard_limit if plan.whole_over_budget else budget
    trim = partial(_set_version, plan, count=count, seal=seal, recallable=recallable)
    for i in range(len(plan.spans)):
        trim(i, None if plan.current >= 0 and i >= plan.current else trim_chars)
    _tighten(plan, costs, trim_chars, trim, count)
    chosen = _fill(plan, costs, _prefer(plan, costs.room(plan.must_cost()), focus, trim,
                                        trim_chars))
    cut = [m for i in range(len(plan.spans)) if i not in chosen and i not in plan.digests
           for m in plan.messages(i)]
    trimmed = [o for i in sorted(chosen) for o, n in zip(plan.messages(i), plan.versions[i])
               if n is not o]
    if not cut and not trimmed and not plan.removed:
        same = repair(messages)      # nothing to do: the list as it was, only made valid
        after = sum(count(m) for m in same)
        return CompactResult(same, [], [], before, after, after <= allowed)
    if notes.memory and carried(notes.memory, systems + [m for i in sorted(chosen) for m in
                                                         plan.versions[i]] + _digest_messages(plan)):
        notes = notes.without_memory()
    new_digest, replaces = digest.build(plan.bodies, cut, seal=seal, cap=cap, recallable=recallable,
                                        summaries=summaries, number=digest.free_number(plan.body),
                                        notes=notes, reused=plan.reused)
    result = repair(systems + _assemble(plan, chosen, new_digest, replaces))
    removed = plan.removed + cut + (_digest_messages(plan) if replaces else [])
    after = sum(count(m) for m in result)
    return CompactResult(result, removed, trimmed, before, after, after <= allowed,
                         _departed(plan, chosen, messages, cut + trimmed), replaces,
                         bool(new_digest and notes))
