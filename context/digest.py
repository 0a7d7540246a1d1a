"""The digest: what left the context, per earlier turn, written without an LLM.

Where a local compaction cuts, the model reads one sealed digest section per compaction: per
turn the user's request (first line, bounded), each tool call with the argument that
identifies it and how it ended, and what the assistant concluded, each with the id that
``tdai_read_cos`` takes; the user's standing rules verbatim. It travels as a tool-call pair
(an assistant message that only calls ``tdai_offload_search`` and its result): no host shows
it as words of the user or the assistant, no provider folds it into the system prompt.

A section also carries the compaction's ``notes`` (``notes.py``): a memory provider's
pre-compaction text, and after a Gateway compaction the focus-matched items it archived; a
compaction that cut no turns puts them in a section of their own (``note_pair``).

Cache-stable: sections already sent are found again by their seal and kept byte-identical;
a new compaction appends one section. Only when the digest would pass its budget is it rebuilt
once, every earlier turn collapsed to its first line (never dropped). Pure.

For any number of turns the digest stays inside its budget: the oldest turn lines fold into
one range line ("#12–1480 1,469 earlier turns …"), the oldest rules into one count line. A chat
of thousands of short exchanges would otherwise list a line per turn and outgrow any budget.
What folds stays readable: the range says how many turns (and how many used tools), and that
every one of them is archived and found by ``tdai_offload_search``. Range and count lines parse
back, so a later fold extends them instead of stacking.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import AbstractSet, Any, Callable, Dict, List, Optional, Sequence, Tuple

from . import item_key, restated, result_keys
from .messages import (call_args, calls_of, group_spans, is_tool_result, results_of, role, text_of,
                       tool_results, trim_text)
from .redact import strict
from .notes import Notes, memory_of
from .provenance import Seal
from .tokens import PER_MESSAGE, estimate_text

Message = Dict[str, Any]
KIND = "digest"
CALL_NAME = "tdai_offload_search"       # a tool the model has: strict providers check names
CALL_ID = "tdo_digest_%d"
SHARE = 0.12                # of the compaction budget: 20 tool-heavy turns as one line each (README "The digest")
FLOOR, CEILING = 400, 6000  # tokens
REQUEST_CHARS, ARG_CHARS, PATH_CHARS, DETAIL_CHARS, RULE_CHARS = 100, 80, 240, 200, 800
PATH_KEYS = ("path", "file_path", "filepath", "file", "url", "uri")
COLLAPSE_TO = 0.5           # a collapse leaves half the budget free: the next ones append
SHORT_LINE = 90             # chars of an old turn line shortened at the cap (last resort)
MAX_CALLS = 12              # per turn line; the rest are counted (their ids stay in detail)
HEADER = ("[tencentdb-offload] Digest of earlier turns. They were moved out of the context by "
          "a local compaction; no summary model was used (if the host said it was "
          "summarizing, this digest is what it did). Nothing is lost: "
          "tdai_read_cos(tool_call_id=\"<id in brackets>\") reads a tool result in full, "
          "tdai_offload_search(query) finds any archived text.")
HEADER_HELD = ("[tencentdb-offload] Digest of earlier turns. They were moved out of the "
               "context by a local compaction; no summary model was used. The archive cannot "
               "be written right now: tdai_read_cos(tool_call_id=\"<id in brackets>\") reads "
               "the texts it holds; one it does not hold is marked [not kept].")
LINE_RE = re.compile(r"^#(\d+)(?:–(\d+))? ")          # a turn line or a range line
_TOOLS_RE = re.compile(r"\(([\d,]+) used tools\)")
_RULES_RE = re.compile(r"^! ([\d,]+) earlier rules ")
NOT_KEPT = "not kept"        # stands where a text's key would: the archive does not hold it
ALL_KEPT = ("all of them are archived: tdai_offload_search(query) finds their text, "
            "tdai_read_cos reads it in full.")
SOME_KEPT = ("tdai_offload_search(query) finds the text of those the archive holds, "
             "tdai_read_cos reads it in full; it may not hold them all (it could not be written).")
RANGE = ("#%d–%d %s earlier turns (%s used tools) folded into this line to keep the digest "
         "small; %s")
RULES_SHARE = 0.5       # of the cap the rules may keep when folding: the turns keep the rest
RULES_ALL_KEPT = "they are archived: tdai_offload_search(query) finds them."
RULES_SOME_KEPT = ("tdai_offload_search(query) finds those the archive holds; it may not hold "
                   "them all (it could not be written).")
RULES_FOLDED = "! %s earlier rules of this session folded to keep the digest small; %s"
LOST = ("Marked [%s]: %%d text(s) that could not be archived (%%s); no recall tool returns "
        "them." % NOT_KEPT)
LOST_BEFORE = "A text marked [%s] could not be archived: no recall tool returns it." % NOT_KEPT
CONTINUED = "Digest of earlier turns, continued:"
NOTE_HEADER = ("[tencentdb-offload] This conversation was compacted; what left it is archived: "
               "tdai_offload_search(query) finds any archived text, tdai_read_cos reads it in full.")
RULES = "Rules the user set for this session (verbatim):"
_RULE_RE = re.compile(r"^\W*(from now on|from here on|going forward|for the rest of (this|the) "
                      r"(session|conversation|chat)|always\b|never\b|do not ever|don't ever|"
                      r"remember to|(please )?(always|never)\b|make sure (to )?always|"
                      r"\[IMPORTANT: The user has invoked the )", re.I)


def budget_for(target: int) -> int:
    """Tokens the whole digest may take in a compaction aiming at ``target`` tokens."""
    return max(FLOOR, min(CEILING, int(target * SHARE)))


def message_key(role: str, text: str) -> str:
    """The key ``tdai_read_cos(key=…)`` reads an archived message by (``item_key``)."""
    return item_key.message_key(role, text)


_LINE_BREAKS = frozenset("\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029")    # what splitlines() splits on
_LEADING_SPACE = re.compile(r"\s*")
_SPACES_IN_LINE = re.compile("[^\\S\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]*")


def one_line(text: str, limit: int, slack: int = 80) -> str:
    """The first non-empty line of ``text``, control characters removed, secrets masked as Hermes
    masks its summaries (``strict``: a digest persists and re-enters every prompt), at most ``limit``
    (a token across it read whole: ``slack`` more are read). Reads no further: results may be MBs."""
    text = text or ""
    kept: List[Tuple[int, str]] = []            # (where in the text, character)
    solid = -1                                  # where the line's last non-space is so far
    capped = False
    # walked in place from the first non-space: no copy of the text, no search past the line
    for at in range(_LEADING_SPACE.match(text).end(), len(text)):
        ch = text[at]
        if ch in _LINE_BREAKS:
            break
        if not ch.isspace():
            solid = at
        if ch >= " " and ch != "\x7f" and not "\u202a" <= ch <= "\u202e":
            kept.append((at, ch))
            if len(kept) > limit + slack:
                capped = True
                break
    if capped:      # spaces from here to the line's end would be its trailing ones
        ahead = _SPACES_IN_LINE.match(text, at + 1).end()
        capped = ahead < len(text) and text[ahead] not in _LINE_BREAKS
    # the line's trailing spaces go, as str.strip() takes them: before the controls are removed
    line = strict("".join(ch for where, ch in kept if capped or where <= solid))
    return line if len(line) <= limit else line[:limit - 1] + "…"


def is_rule(text: str) -> bool:
    """A message the user meant for the whole session ("from now on …", a skill invocation)."""
    return bool(_RULE_RE.match(text or ""))


# --- what one earlier turn did ------------------------------------------------------------

@dataclass
class Call:
    tool_call_id: str
    name: str
    arg: str = ""
    outcome: str = ""            # "" ok, else "error: <first line>" or the Gateway's summary
    summary: str = ""


@dataclass
class Turn:
    request: str = ""            # "" when the turn's request is still in the context
    key: str = ""
    calls: List[Call] = field(default_factory=list)
    conclusion: str = ""


def key_arg(args: Any) -> str:
    """The argument that identifies a call (path, command, query, URL), one bounded line."""
    try:
        data = json.loads(args) if isinstance(args, str) else args
    except (ValueError, RecursionError):
        data = args
    if isinstance(data, dict):
        for k in ("path", "file_path", "filepath", "file", "command", "cmd", "query", "q",
                  "url", "uri", "pattern", "tool_call_id", "name", "target"):
            if isinstance(data.get(k), (str, int, float)) and str(data[k]).strip():
                value = one_line(str(data[k]), 10 * PATH_CHARS)
                if k in PATH_KEYS:              # a path names the file: whole, else its end
                    return value if len(value) <= PATH_CHARS else "…" + value[-(PATH_CHARS - 1):]
                return one_line(value, ARG_CHARS)
        data = next((v for v in data.values() if isinstance(v, str) and v.strip()), "")
    return one_line(data if isinstance(data, str) else "", ARG_CHARS)


def outcome_of(text: str) -> str:
    """"" for a result that succeeded, else "error: <first line>"."""
    try:
        data = json.loads(text) if text[:1] == "{" else None
    except (ValueError, RecursionError):
        data = None
    if isinstance(data, dict):
        err = data.get("error")
        if err:
            return "error: " + one_line(str(err), DETAIL_CHARS)
        code = data.get("exit_code", data.get("returncode"))
        if isinstance(code, int) and code != 0:
            return "error: exit %d %s" % (code, one_line(str(data.get("output", "")), 80))
        if data.get("success") is False:
            return "error: " + one_line(str(data.get("message", "failed")), DETAIL_CHARS)
        return ""
    first = one_line(text, DETAIL_CHARS)
    low = first.lower()
    return "error: " + first if low.startswith(("error", "traceback", "failed", "exception")) else ""


def turns_of(cut: Sequence[Message], summaries: Optional[Dict[str, str]] = None,
             reused: AbstractSet[str] = frozenset()) -> Tuple[List[Turn], List[Tuple[str, str]]]:
    """The turns of ``cut`` (oldest first) and the rules among them as (text, key); a call
    whose id is ``reused`` is listed by its result's own key (``result_keys``)."""
    turns: List[Turn] = []
    rules: List[Tuple[str, str]] = []
    by_id: Dict[str, Call] = {}
    for m in cut:
        if not isinstance(m, dict):
            continue
        if role(m) == "user" and not is_tool_result(m):
            text = text_of(m)
            key = message_key("user", _archived_text(m))
            if is_rule(text):
                rules.append((text, key))
            turns.append(Turn(request=one_line(text, REQUEST_CHARS) or "(no text)", key=key))
            continue
        if not turns:
            turns.append(Turn())                # steps of a turn whose request stays
        turn = turns[-1]
        if role(m) == "assistant":
            for tid, (name, args) in call_args(m).items():
                by_id[tid] = Call(tid, name, key_arg(args))
                turn.calls.append(by_id[tid])
            content = m.get("content")
            said = content if isinstance(content, str) else text_of({"content": content})
            if said.strip():
                turn.conclusion = conclusion_of(said)
        for tid, text in tool_results(m):
            call = by_id.get(tid)
            if call is not None:
                call.outcome = outcome_of(text)
                call.tool_call_id = result_keys.key_of(tid, text, reused)
                summary = (summaries or {}).get(tid)
                if summary:
                    call.summary = one_line(restated.beyond(summary, "%s %s" % (call.name, call.arg)),
                                            DETAIL_CHARS)
    return turns, rules


def _archived_text(m: Message) -> str:
    content = m.get("content")
    return content if isinstance(content, str) and not m.get("tool_calls") else text_of(m)


def conclusion_of(text: str) -> str:
    """What an assistant said last: its final sentence when short, else its first line."""
    flat = " ".join(text.split())
    parts = re.split(r"(?<=[.!?。])\s+", flat)
    last = parts[-1] if parts else ""
    return one_line(last if 0 < len(last) <= DETAIL_CHARS else text, DETAIL_CHARS)


# --- rendering ----------------------------------------------------------------------------

def render_turn(n: int, turn: Turn) -> str:
    """A turn block: its first line stands alone (the collapsed form), details follow indented."""
    head = ("#%d user: %s (%s)" % (n, turn.request, turn.key) if turn.request
            else "#%d (steps of a turn whose request is still shown)" % n)
    listed = ["%s %s [%s]%s" % (c.name, c.arg, c.tool_call_id, " ✗" if c.outcome else "")
              for c in turn.calls[:MAX_CALLS]]
    if len(turn.calls) > MAX_CALLS:
        listed.append("+%d more calls" % (len(turn.calls) - MAX_CALLS))
    lines = [head + (" · " + ", ".join(listed) if listed else "")]
    for c in turn.calls[MAX_CALLS:]:
        lines.append("   also %s %s [%s]" % (c.name, c.arg, c.tool_call_id))
    for c in turn.calls:
        if c.summary:
            lines.append("   [%s] summary: %s" % (c.tool_call_id, c.summary))
        if c.outcome:
            lines.append("   [%s] %s" % (c.tool_call_id, c.outcome))
    if turn.conclusion:
        lines.append("   concluded: " + turn.conclusion)
    return "\n".join(lines)


def rule_line(text: str, key: str) -> str:
    """A rule on one line: its own line breaks would read, at the next collapse, as digest
    structure (a turn line, a memory note); the whole text stays readable by its key."""
    return "! %s (%s)" % (trim_text(" ".join(strict(text).split()), RULE_CHARS, "full text: " + key), key)


def render(turns: Sequence[Turn], rules: Sequence[Tuple[str, str]], first: int, *,
           header: str, collapsed_before: Sequence[str] = (), notes: Notes = Notes()) -> str:
    parts = [header]
    if rules:
        parts.append(RULES)
        parts.extend(rule_line(t, k) for t, k in rules)
    parts.extend(notes.lines())
    if collapsed_before or turns:
        parts.append("Turns:")
    parts.extend(collapsed_before)
    parts.extend(render_turn(first + i, t) for i, t in enumerate(turns))
    return "\n".join(parts)


def collapse(body: str) -> Tuple[List[str], List[str]]:
    """(rule lines, one line per turn or folded range) of an earlier digest body: details
    dropped."""
    rules = [ln for ln in body.splitlines() if ln.startswith("! ")]
    return rules, [ln for ln in body.splitlines() if span_of(ln)]


def last_number(bodies: Sequence[str]) -> int:
    return max((span_of(ln)[1] for b in bodies for ln in b.splitlines()
                if span_of(ln)), default=0)


# --- the messages -------------------------------------------------------------------------

def free_number(messages: Sequence[Message]) -> int:
    """The smallest n whose digest call id is not already in ``messages`` (ids stay unique
    even beside digests another key sealed)."""
    used = {tid for m in messages if isinstance(m, dict) for tid in calls_of(m)}
    n = 1
    while CALL_ID % n in used:
        n += 1
    return n


def pair(seal: Seal, body: str, n: int) -> List[Message]:
    """The sealed digest as an assistant call and its result."""
    tid = CALL_ID % n
    call = {"id": tid, "type": "function",
            "function": {"name": CALL_NAME, "arguments": json.dumps({"query": "earlier turns"})}}
    return [{"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": tid, "content": seal.seal_text(KIND, body)}]


def body_of(group: Sequence[Message], seal: Seal) -> Optional[str]:
    """The digest body when ``group`` is a digest pair this installation sealed, else None."""
    if len(group) != 2 or calls_of(group[0]) != results_of(group[1]):
        return None
    if (group[0].get("content") or "") != "" or role(group[1]) != "tool":
        return None
    opened = seal.open_text(group[1].get("content"))
    return opened[1] if opened is not None and opened[0] == KIND else None


def tokens_of(body: str) -> int:
    return estimate_text(body) + 2 * PER_MESSAGE + 40     # the call and the seal line


def build(earlier: Sequence[str], cut: Sequence[Message], *, seal: Seal, cap: int,
          recallable: bool = True, summaries: Optional[Dict[str, str]] = None,
          number: int = 1, notes: Notes = Notes(),
          reused: AbstractSet[str] = frozenset()) -> Tuple[List[Message], bool]:
    """The digest messages to follow the ``earlier`` digest bodies (kept as they are) for the
    messages ``cut`` now, and whether they replace the earlier ones (a collapse at the cap).
    ``notes`` ride in the new section; with nothing cut there is no section."""
    turns, rules = turns_of(cut, summaries, reused)
    first = last_number(earlier) + 1
    header = CONTINUED if earlier else (HEADER if recallable else HEADER_HELD)
    if not turns and not rules:
        return [], False
    body = render(turns, rules, first, header=header, notes=notes)
    used = sum(tokens_of(b) for b in earlier)
    if used + tokens_of(body) <= cap:
        return pair(seal, body, number), False
    if not notes.memory:        # the provider's newest text outlives the collapse
        notes = Notes(next((memory_of(b) for b in reversed(earlier) if memory_of(b)), ""),
                      notes.focus, notes.focus_left)
    body = _collapsed(earlier, turns, rules, first, cap, recallable, notes.lines())
    return pair(seal, body, number), True


def note_pair(messages: Sequence[Message], notes: Notes, *, seal: Seal) -> List[Message]:
    """A section holding only ``notes``, for a compaction that cut no turns (the Gateway's,
    or a local one that only trimmed): "continued" when ``messages`` hold a digest."""
    spans = group_spans(messages)
    earlier = any(body_of(messages[s:e], seal) is not None for s, e in spans)
    body = "\n".join([CONTINUED if earlier else NOTE_HEADER] + notes.lines())
    return pair(seal, body, free_number(messages))


def unkept(body: str, lost: AbstractSet[str], why: str) -> str:
    """``body`` with each key of ``lost`` (texts the archive does not hold) replaced by
    ``[not kept]`` where a digest names it (a call's ``[id]``, a message's ``(key)``, a rule's
    "full text: key"), and a line saying why; ``body`` itself when it names none."""
    if not lost:
        return body
    keys = "|".join(re.escape(k) for k in sorted(lost, key=len, reverse=True))
    named = re.compile(r"\[(%s)\]|\((%s)\)|full text: (%s)(?![\w~.-])" % (keys, keys, keys))
    hit: set = set()

    def mark(m: "re.Match[str]") -> str:
        hit.add(next(g for g in m.groups() if g))
        return {"[": "[%s]", "(": "(%s)"}.get(m.group()[0], "full text %s") % NOT_KEPT
    # a range or rules line folded in this compaction may hold some: it no longer says all
    new = "\n".join(map(partly_kept, named.sub(mark, body).split("\n")))
    if not hit:
        return new
    head, _nl, rest = new.partition("\n")
    return "\n".join([_honest(head), LOST % (len(hit), why)] + ([rest] if rest else []))


def _honest(header: str) -> str:
    """A section's header (its first line) that promises nothing of texts marked not kept."""
    return header.replace(" Nothing is lost: ", " ", 1)


def _collapsed(earlier: Sequence[str], turns: List[Turn], rules: List[Tuple[str, str]],
               first: int, cap: int, recallable: bool, note_lines: Sequence[str] = ()) -> str:
    """One digest within ``cap``: earlier turns one line each, then the newest turns in full
    while the whole stays within half the cap (so the next compactions append again); as a
    last resort the oldest lines are shortened, and for thousands of turns the oldest fold
    into one range (``fold_turns``)."""
    old_rules: List[str] = []
    old_lines: List[str] = []
    for b in earlier:
        r, lines = collapse(b)
        old_rules.extend(r)
        old_lines.extend(lines)
    new_rules = [rule_line(t, k) for t, k in rules]
    header = HEADER if recallable else HEADER_HELD
    if some_lost(old_lines + old_rules):
        header = _honest(header) + " " + LOST_BEFORE

    def head(rule_lines: List[str]) -> List[str]:
        return ([header] + ([RULES] + rule_lines if rule_lines else []) + list(note_lines)
                + ["Turns:"])

    full = [render_turn(first + i, t) for i, t in enumerate(turns)]
    lines_only = [f.split("\n", 1)[0] for f in full]
    all_rules = old_rules + new_rules

    def body(cut: int) -> str:              # the oldest ``cut`` new turns one line each
        return "\n".join(head(all_rules) + old_lines + lines_only[:cut] + full[cut:])

    def fits(cut: int) -> bool:
        return tokens_of(body(cut)) <= int(cap * COLLAPSE_TO)

    # the most turns in full that fit (each body is the whole digest, and thousands of turns
    # may leave at once); cut = len(turns) - keep_full, keep_full >= 1
    if not turns or not fits(len(turns) - 1):
        return within_cap(head, all_rules, old_lines + lines_only, cap, tokens_of,
                          lambda ln: _shorten(ln, SHORT_LINE))
    return body(fewest(fits, len(turns) - 1))


def _shorten(line: str, width: int) -> str:
    return line if len(line) <= width else line[:width - 1] + "…"


# --- folding: the oldest turn lines into a range, the oldest rules into a count -----------

def some_lost(lines: Sequence[str]) -> bool:
    """Whether ``lines`` name a text the archive does not hold (or fold some)."""
    return any("[%s]" % NOT_KEPT in ln or "(%s)" % NOT_KEPT in ln or SOME_KEPT in ln
               or RULES_SOME_KEPT in ln for ln in lines)


def partly_kept(line: str) -> str:
    """A range or rules line that no longer says all it folds is archived."""
    return line.replace(ALL_KEPT, SOME_KEPT).replace(RULES_ALL_KEPT, RULES_SOME_KEPT)


def span_of(line: str) -> Optional[Tuple[int, int]]:
    """(first, last) turn number a turn line or range line stands for, else None."""
    m = LINE_RE.match(line)
    if m is None:
        return None
    first = int(m.group(1))
    return first, int(m.group(2) or first)


def _number(text: str) -> int:
    return int(text.replace(",", ""))


def fold_turns(lines: Sequence[str]) -> List[str]:
    """One range line for ``lines`` (turn lines and earlier range lines, oldest first)."""
    spans = [s for s in map(span_of, lines) if s is not None]
    if not spans:
        return []
    turns = tools = 0
    for line, (first, last) in zip((ln for ln in lines if span_of(ln)), spans):
        turns += last - first + 1
        counted = _TOOLS_RE.search(line) if last > first else None
        tools += _number(counted.group(1)) if counted else int(" · " in line)
    first, last = min(s[0] for s in spans), max(s[1] for s in spans)
    return [RANGE % (first, last, "{:,}".format(turns), "{:,}".format(tools),
                     SOME_KEPT if some_lost(lines) else ALL_KEPT)]


def fold_rules(lines: Sequence[str]) -> List[str]:
    """One count line for rule lines (earlier count lines included), oldest first."""
    total = 0
    for line in lines:
        counted = _RULES_RE.match(line)
        total += _number(counted.group(1)) if counted else 1
    return [RULES_FOLDED % ("{:,}".format(total), RULES_SOME_KEPT if some_lost(lines)
                            else RULES_ALL_KEPT)] if total else []


def fewest(fits: Callable[[int], bool], most: int) -> int:
    """The smallest k in 0..most with ``fits(k)``, for a ``fits`` that stays true once true
    (``most`` when none fits): a search, since each try renders the whole digest."""
    lo, hi = 0, most
    while lo < hi:
        mid = (lo + hi) // 2
        if fits(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


def within_cap(head: Callable[[List[str]], List[str]], rules: List[str], lines: List[str],
           cap: int, cost: Callable[[str], int], short: Callable[[str], str]) -> str:
    """A digest body within ``cap``: ``head(rule lines)``, then the turn ``lines`` with as few
    of the oldest shortened as it takes; when even all shortened are too long, as few of the
    oldest folded into a range (and, for thousands of rules, the oldest rules into a count
    so the rules keep at most ``RULES_SHARE`` of the cap)."""
    def body(r: int, k: int, f: int) -> str:
        shortened = [short(ln) for ln in lines[f:k]] + lines[max(k, f):]
        return "\n".join(head(fold_rules(rules[:r]) + rules[r:]) + fold_turns(lines[:f])
                         + shortened)

    n = len(lines)
    if cost(body(0, n, 0)) > cap:
        rules_folded = fewest(lambda r: cost(body(r, n, n)) <= cap * RULES_SHARE, len(rules))
        folded = fewest(lambda f: cost(body(rules_folded, n, f)) <= cap, n)
        return body(rules_folded, n, folded)
    return body(0, fewest(lambda k: cost(body(0, k, 0)) <= cap, n), 0)
