"""End-to-end: where a compaction lands, and how often it comes, in one long `hermes chat`
session (local mode, 64K window, 2 × 22K-char files per turn).

The engine aims at COMPACT_RATIO of the window, measured with an estimate calibrated on the
provider's counts, system prompt and tool schemas included. A host that hides those from the
engine (0.22 imports the plugin twice: the hooks that see each request ran on a second
runtime) made compactions land above the target and come twice as often. On every host:
the context right after a compaction is at most the target (median) and never more than 10 %
over it, and there is at most one compaction per two turns (plus one).
"""
from __future__ import annotations

import statistics
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402
from tests.fakes.fake_llm import FakeLLM  # noqa: E402

HERMES_VERSION = harness.hermes_version() or "unknown"
CONTEXT = 64000
RATIO = 0.5
TURNS = 12

if not harness.hermes_bin().exists():  # pragma: no cover - wrong interpreter
    pytest.skip(f"hermes CLI not found next to {sys.executable}; run tests/e2e with the "
                "Hermes venv's python", allow_module_level=True)


@pytest.mark.parametrize("hermes", [HERMES_VERSION], ids=lambda v: f"hermes-{v}")
def test_compactions_land_at_the_target_and_do_not_come_too_often(tmp_path, hermes):
    problem = harness.plugin_problem()
    if problem:
        pytest.fail(problem)
    supply = harness.FileSupply(tmp_path / "files", tag="budget")
    with FakeLLM() as llm:
        home = harness.make_home(tmp_path, llm.url, context_length=CONTEXT, env={
            "TENCENTDB_OFFLOAD_GATEWAY_URL": "off", "TENCENTDB_OFFLOAD_THRESHOLD": "0.75",
            "TENCENTDB_OFFLOAD_COMPACT_RATIO": str(RATIO)})
        conv = harness.Conversation(llm, home, timeout=300)
        for _ in range(TURNS):
            harness.read_files_turn(conv, supply.take(2))
        harness.assert_engine_used(conv)
    harness.assert_all_valid(llm)
    harness.assert_budget(conv, CONTEXT)
    drops = harness.compactions([e.body for e in conv.main_exchanges])
    after = [c.tokens_after / CONTEXT for c in drops]
    line = ("BUDGET hermes=%s turns=%d compactions=%d after/window median=%.3f max=%.3f"
            % (hermes, TURNS, len(drops), statistics.median(after) if after else 0,
               max(after, default=0)))
    print(line + "\n" + conv.summary())
    assert len(drops) >= 3, line
    assert statistics.median(after) <= RATIO + 0.01, line
    assert max(after) <= RATIO * 1.10, line
    assert len(drops) <= TURNS // 2 + 1, line
