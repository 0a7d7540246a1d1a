"""Keeps a digest inside its budget for any number of turns: the oldest turn lines fold into
one range line ("#12–1480 1,469 earlier turns …"), the oldest rules into one count line.

A chat of thousands of short exchanges would otherwise list a line per turn and outgrow any
budget. What folds stays readable: the range says how many turns (and how many used tools),
and that every one of them is archived and found by ``tdai_offload_search``. Range and count
lines parse back, so a later fold extends them instead of stacking. Pure.
"""

from __future__ import annotations

import re
from typing import Callable, List, Optional, Sequence, Tuple

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


def within(head: Callable[[List[str]], List[str]], rules: List[str], lines: List[str],
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
