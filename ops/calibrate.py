"""Replay's stand-in for the tool schemas Hermes sent: state.db keeps the messages but not the
tool definitions, which weigh thousands of tokens on every request. Their size is fitted to
what state.db does record of the live session — how many compactions it had (one run of
written-back rows each) and its usage totals (``sessions.input_tokens`` over
``api_call_count``) — so the replay's requests are about as large as the live ones."""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Tuple

from .driver import PROVIDER_CHARS_PER_TOKEN

Tools = List[Dict[str, Any]]


def stand_in(tokens: int) -> Tools:
    """One tool schema of about ``tokens`` tokens (nothing when 0)."""
    if tokens <= 0:
        return []
    return [{"type": "function", "function": {
        "name": "hermes_tools_stand_in",
        "description": "x" * int(tokens * PROVIDER_CHARS_PER_TOKEN),
        "parameters": {"type": "object", "properties": {}}}}]


GRID = (0, 1_000, 2_000, 3_000, 4_000, 6_000, 8_000, 10_000, 12_000, 16_000, 20_000)


def schema_tokens(source: Dict[str, Any], drive: Callable[[Tools], Tuple[int, int, int]]) -> int:
    """Tokens per request to add so the replay behaves like the live session.

    ``drive(extra_tools)`` replays the session with those tools and returns (prompt tokens
    sent, requests, compactions). Neither is monotonic in the stand-in's size (a larger one
    moves compactions earlier, which shrinks later requests), so sizes are tried on a grid:
    the fewest compactions off the live count wins, then the closest mean request. 0 when
    the source has no usage totals."""
    live, calls = int(source.get("input_tokens") or 0), int(source.get("api_calls") or 0)
    if live <= 0 or calls <= 0:
        return 0
    target = source.get("live_compactions")
    best, best_score = 0, (float("inf"), float("inf"))
    for extra in GRID:
        sent, requests, compactions = drive(stand_in(extra))
        if requests <= 0:
            return 0
        score = (abs(compactions - target) if target is not None else 0,
                 abs(sent / requests - live / calls))
        if score < best_score:
            best, best_score = extra, score
    return best
