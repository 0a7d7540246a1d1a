#!/usr/bin/env python3
"""Every schedule of turn-start compactions for one session shape, priced under the prompt-cache
model (``common/cache_model.py``): the cheapest schedule for each number of rewrites.

Issue 55 asks for both "rewrites at most the floor + 0.5" and "cost at most 0.92x the
built-in's". Whether one schedule can hold both is a property of the shape and of how deep a
compaction lands, not of a policy, so this enumerates them all. A compaction lands as the
plugin's turn-start compaction does: the system prompt and tools, the digest (it grows by a
section each time) and the current turn; its prefix stays cached except the first time, where
the host rebuilds its system prompt. Every request must stay at or under the ceiling.

The defaults are the per-turn CLI side-by-side's session on a 100K window
(tests/e2e/test_side_by_side_cli.py: 9 turns of 3 reads of ~25 KB, 2 recall turns of 2
read-backs), as measured on Hermes 0.22.2: its first request, each step's growth, the landing
and what the first compaction leaves cached. Pass ``--builtin`` (a measured cost) for ratios.

Usage: ``python3 bench/rewrite_schedules.py [--window 100000] [--read-turns 9] [--recall-turns 2]
[--builtin 365934]`` (the suite's own run: ``--window 64000 --read-turns 7``).
"""

from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common  # noqa: E402

_common.load_plugin()
from tencentdb_offload.common import cache_model  # noqa: E402
from tencentdb_offload.settings.thresholds import CEILING  # noqa: E402

# the CLI side-by-side's turns: (turn-start growth, the step's growth), in tokens
READ_TURN, RECALL_TURN = (33, 18_824), (33, 10_337)
FIRST_REQUEST = 11_444      # system prompt, tools and the first user message
LANDING = 12_860            # the first turn-start landing: system prompt, tools, digest, turn
DIGEST_GROWTH = 300         # each later compaction's digest section and turn
FIRST_CACHED = 6_310        # what the host's rebuilt system prompt leaves cached the first time
NEW_AT_LANDING = 300        # written at a later landing (the new section and the turn)


def price(turns: Sequence[Tuple[int, int]], at: Sequence[int]) -> Tuple[float, int]:
    """(cost, largest request) of compacting at the starts of the turns in ``at``."""
    cost, largest, context = 0.0, 0, FIRST_REQUEST - turns[0][0]
    compactions = 0
    for n, (start, step) in enumerate(turns):
        if n in at:
            compactions += 1
            context = LANDING + (compactions - 1) * DIGEST_GROWTH
            cached = FIRST_CACHED if compactions == 1 else context - NEW_AT_LANDING
        else:
            cached = context if n else 0
            context += start
        cost += cache_model.cost(context, cached)
        largest = max(largest, context)
        cost += cache_model.cost(context + step, context)
        context += step
        largest = max(largest, context)
    return cost, largest


def cheapest(turns: Sequence[Tuple[int, int]], window: int) -> Dict[int, Tuple[float, int, tuple]]:
    """For each number of rewrites: the cheapest schedule that keeps every request at or
    under the ceiling, as (cost, largest request, turn numbers)."""
    best: Dict[int, Tuple[float, int, tuple]] = {}
    ceiling = int(window * CEILING)
    for k in range(len(turns)):
        for at in itertools.combinations(range(1, len(turns)), k):
            cost, largest = price(turns, at)
            if largest <= ceiling and (k not in best or cost < best[k][0]):
                best[k] = (cost, largest, tuple(t + 1 for t in at))
    return best


def table(best: Dict[int, Tuple[float, int, tuple]], window: int,
          builtin: Optional[float]) -> List[str]:
    rows = ["| rewrites | cheapest cost | of the built-in's | largest request | compacting at turns |",
            "|---|---|---|---|---|"]
    for k in sorted(best):
        cost, largest, at = best[k]
        rows.append("| %d | %.3fM | %s | %.2f of the window | %s |" % (
            k, cost / 1e6, "%.3fx" % (cost / builtin) if builtin else "-", largest / window,
            ", ".join(map(str, at)) or "-"))
    return rows


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--window", type=int, default=100_000)
    ap.add_argument("--read-turns", type=int, default=9)
    ap.add_argument("--recall-turns", type=int, default=2)
    ap.add_argument("--builtin", type=float, default=None,
                    help="the built-in's measured cost on the same session, for ratios")
    args = ap.parse_args(argv)
    turns = [READ_TURN] * args.read_turns + [RECALL_TURN] * args.recall_turns
    best = cheapest(turns, args.window)
    print("\n".join(table(best, args.window, args.builtin)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
