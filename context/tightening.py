"""The must-keep part of a local compaction, made to fit: when the current turn, its newest
step and the head are over the room, trim them step by step (the newest step's results as few
as possible), then let the head go. Part of ``fallback.local_compact``; no state."""

from __future__ import annotations

from typing import Any, Callable, Set

from . import messages
from .compact_plan import Budget, Plan

HARDER = (2, 4)                    # trim_chars divisors, then the fixed limits below
FLOORS = (300, 120)


def tighten(plan: Plan, budget: Budget, trim_chars: int, trim: Callable[..., None],
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
        ids = messages.results_of(orig)
        if now is orig or not ids:          # already whole, or not a result
            continue
        extra = count(orig) - count(now)
        if extra <= spare:
            spare -= extra
            whole.update(ids)
    trim(i, trim_chars, keep=whole)
    return whole
