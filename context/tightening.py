"""The must-keep part of a local compaction, made to fit: when the current turn, its newest
step and the head are over the room, trim them step by step (the newest step's results as few
as possible), then let the head go. Part of ``fallback.local_compact``; no state."""

from __future__ import annotations

from typing import Callable, Set

from . import messages as M
from .compact_plan import Budget, Plan

HARDER = (2, 4)                    # trim_chars divisors, then the fixed limits below
FLOORS = (300, 120)


def tighten(plan: Plan, budget: Budget, trim_chars: int, trim: Callable[..., None]) -> None:
    """When the must-keep part is over budget: trim it harder step by step, then let the
    head go (the current user message and the newest group always stay). The current user
    message is the user's own words, byte for byte: never trimmed, whatever it starts with.
    What the model asked to read back in this turn (``asked_back``) is trimmed only when it
    would pass the ceiling: trimmed, it would point back to itself, and be read again."""
    _tighten_to(plan, budget.room, trim_chars, trim, plan.asked_back)
    if plan.asked_back and budget.hard_room(plan.must_cost()) < 0:
        _tighten_to(plan, budget.hard_room, trim_chars, trim, frozenset())


def _tighten_to(plan: Plan, room: Callable[[int], int], trim_chars: int,
                trim: Callable[..., None], keep: Set[str]) -> None:
    trimmable = [i for i in plan.must if i != plan.current]
    newest = len(plan.spans) - 1
    if room(plan.must_cost()) < 0:
        for i in trimmable:
            if i != newest:
                trim(i, trim_chars, keep=keep)
        if newest in trimmable:
            keep = _trim_fewest(plan, newest, room, trim_chars, trim, keep)
    for limit in tuple(trim_chars // d for d in HARDER) + FLOORS:
        if room(plan.must_cost()) >= 0:
            return
        for i in trimmable:
            trim(i, limit, users=True, keep=keep)
    if room(plan.must_cost()) < 0:
        plan.must.difference_update(plan.head)
        plan.head = []


def _trim_fewest(plan: Plan, i: int, room: Callable[[int], int], trim_chars: int,
                 trim: Callable[..., None], keep: Set[str]) -> Set[str]:
    """The newest step's results (what the model asked for and has not read yet) trimmed as
    few as the room allows: each, newest first, stays whole if it still fits (trimming all of
    them for one over the line would hide every one). Returns the ids kept whole."""
    whole = set(keep)
    trim(i, trim_chars, keep=whole)
    ids = [t for m in plan.messages(i) for t in M.results_of(m)]
    for tid in reversed(ids):
        if tid in whole:
            continue
        trim(i, trim_chars, keep=whole | {tid})
        if room(plan.must_cost()) >= 0:
            whole.add(tid)
    trim(i, trim_chars, keep=whole)
    return whole
