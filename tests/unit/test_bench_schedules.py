"""bench/rewrite_schedules.py: the enumeration of turn-start compaction schedules behind issue
55's "rewrites at the floor" against "cost at most 0.92x" (docs/benchmarks.md)."""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import rewrite_schedules as rs  # noqa: E402


def latest_schedule(turns, window):
    """Compact only where the turn would pass the ceiling otherwise (as late as possible)."""
    ceiling = int(window * rs.CEILING)
    at, context, compactions = [], rs.FIRST_REQUEST - turns[0][0], 0
    for n, (start, step) in enumerate(turns):
        if n and context + start + step > ceiling:
            compactions += 1
            at.append(n)
            context = rs.LANDING + (compactions - 1) * rs.DIGEST_GROWTH + step
        else:
            context += start + step
    return at


def test_the_fewest_rewrites_found_are_the_floor_and_every_schedule_fits():
    for window in (64_000, 100_000, 128_000):
        for reads in (4, 7, 9, 12):
            turns = [rs.READ_TURN] * reads + [rs.RECALL_TURN] * 2
            best = rs.cheapest(turns, window)
            latest = latest_schedule(turns, window)
            assert min(best) == len(latest), (window, reads)
            assert all(largest <= window * rs.CEILING for _, largest, _ in best.values())
            cost, largest = rs.price(turns, latest)
            assert largest <= window * rs.CEILING and best[len(latest)][0] <= cost


def test_the_table_names_each_rewrite_count_once_with_its_ratio():
    best = rs.cheapest([rs.READ_TURN] * 7 + [rs.RECALL_TURN] * 2, 64_000)
    rows = rs.table(best, 64_000, 300_000.0)
    assert len(rows) == 2 + len(best)
    assert all(row.count("x |") == 1 for row in rows[2:])
