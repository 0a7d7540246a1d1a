"""What status and doctor say about the trigger and the landing is what the engine does, for
any window and any THRESHOLD / COMPACT_RATIO / MAX_CONTEXT_TOKENS."""

from __future__ import annotations

import itertools
import re

from helpers import make_engine
from tencentdb_offload.status.model import StatusReport
from tencentdb_offload.status.render import render

WINDOWS = (64_000, 100_000, 200_000, 1_000_000)
SETTINGS = ({}, {"max_context_tokens": "20000"}, {"max_context_tokens": "100000"},
            {"max_context_tokens": "5000000"},
            {"threshold": "0.5", "compact_ratio": "0.3", "max_context_tokens": "60000"})


def _said_landing(text: str, window: int) -> int:
    """The landing a reader takes from ``down to …``: tokens when named, else the share."""
    head = text.split("(")[0]
    tokens = re.search(r"down to ([\d,]+) tokens", head)
    if tokens:
        return int(tokens.group(1).replace(",", ""))
    return int(window * float(re.search(r"down to (\d+)%", head).group(1)) / 100)


def test_the_landing_said_is_where_the_engine_lands(tmp_path):
    for n, (env, window) in enumerate(itertools.product(SETTINGS, WINDOWS)):
        rt, eng = make_engine(tmp_path / str(n), context_length=window, **env)
        try:
            trigger = rt.registry.newest_trigger()
            line = render(StatusReport(rt.settings, "store", trigger=trigger)).splitlines()[2]
            said = _said_landing("down to" + line.split(", down to")[1], window)
            target = eng.compaction_target()
            assert abs(said - target) <= window // 100, (env, window, said, target, line)
            assert format(eng.threshold_tokens, ",") + " tokens" in line, line
        finally:
            rt.close()
