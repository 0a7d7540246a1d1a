"""End-to-end: the plugin in LOCAL mode (no Gateway) inside the real ``hermes chat`` CLI, with
Hermes 0.22's plugin isolation (the engine in a plugin-host process). In-process local mode is
the story session's (tests/e2e/test_story.py), which carries the same bars.

Runs on whatever Hermes is installed next to ``sys.executable`` (the runner runs this file
once per supported version; the version is part of the test id). Scenario, 64K window:
``DO read`` turns fill the context with needle files until the engine has compacted twice,
then ``DO recall <first read_file id>`` must bring the first needle back from the archive.
Everything is asserted on the wire, i.e. on what the (fake) model received.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402
from tests.fakes.fake_llm import FakeLLM  # noqa: E402

HERMES_VERSION = harness.hermes_version() or "unknown"
HOST = tuple(int(x) for x in HERMES_VERSION.split(".")[:2]) if HERMES_VERSION[:1].isdigit() else (0, 0)
CONTEXT = 64000
THRESHOLD = 0.75
RATIO = 0.5

if not harness.hermes_bin().exists():  # pragma: no cover - wrong interpreter
    pytest.skip(f"hermes CLI not found next to {sys.executable}; run tests/e2e with the "
                "Hermes venv's python", allow_module_level=True)


def local_home(tmp_path: Path, llm: FakeLLM, extra_config: dict = {}) -> Path:
    """A HERMES_HOME with this plugin, no Gateway, a 64K window and the thresholds above."""
    problem = harness.plugin_problem()
    if problem:
        pytest.fail(problem)
    return harness.make_home(tmp_path, llm.url, context_length=CONTEXT, env={
        "TENCENTDB_OFFLOAD_GATEWAY_URL": "off", "TENCENTDB_OFFLOAD_THRESHOLD": str(THRESHOLD),
        "TENCENTDB_OFFLOAD_COMPACT_RATIO": str(RATIO)}, extra_config=extra_config)


# 0.22 can run user plugins, context engines included, in a plugin-host process per profile
# (``plugins.isolation: host``): the engine's methods then run there, over the host's wire.
# In-process, the same bars (compactions, budget, continuity, recall after the first file left)
# are asked of the suite's one long local session, tests/e2e/test_story.py.
ISOLATION = [pytest.param("host", id="isolation-host", marks=pytest.mark.skipif(
    HOST < (0, 22), reason="plugins.isolation is new in 0.22; in-process runs in test_story"))]


@pytest.mark.parametrize("isolation", ISOLATION)
@pytest.mark.parametrize("hermes", [HERMES_VERSION], ids=lambda v: f"hermes-{v}")
def test_local_mode_compacts_and_recalls(tmp_path, hermes, isolation):
    supply = harness.FileSupply(tmp_path / "files", tag="local")
    extra = {"plugins": {"isolation": isolation}} if isolation == "host" else {}
    with FakeLLM() as llm:
        home = local_home(tmp_path, llm, extra)
        conv = harness.Conversation(llm, home)

        harness.read_files_turn(conv, supply.take(3))
        harness.assert_engine_used(conv)  # fail fast (and clearly) if the plugin did not load
        harness.fill_until_compactions(conv, supply, needed=2, threshold_tokens=int(CONTEXT * THRESHOLD),
                                       context_length=CONTEXT)
        call_id, args = harness.first_read_call(llm)
        needle = dict(supply.files)[args["path"]]
        assert args["path"] == supply.files[0][0]
        recall = conv.say(f"DO recall {call_id}")
        harness.check_turn(recall, "recall", "recalled: ")
    print(f"hermes {hermes}, {len(conv.turns)} turns:\n{conv.summary()}")  # shown with -rP / on failure

    harness.assert_engine_used(conv)
    harness.assert_all_valid(llm)
    harness.assert_budget(conv, CONTEXT)
    harness.assert_history_continuity(conv, int(CONTEXT * THRESHOLD))

    by_turn = conv.compactions_by_turn()
    drops = [c for cs in by_turn.values() for c in cs]
    # The local compaction trims long tool results (head + tail + a recall pointer) before it
    # archives whole messages, so a compaction shows either the notice or the trim pointer.
    ours = [c for c in drops if (c.removed and c.has_notice) or c.has_trim]
    assert len(ours) >= 2, (
        f"expected >= 2 compactions by this engine (fewer messages with the "
        f"{harness.NOTICE_MARKER} notice, or tool results trimmed with a recall pointer), "
        f"saw {len(ours)}; context drops seen: "
        f"{len(drops)} ({sum(1 for c in drops if not c.removed)} only rewrote content, "
        f"{sum(1 for c in drops if c.removed and not c.has_notice)} removed messages without "
        f"a notice)\n{conv.summary()}")
    harness.assert_no_loop(conv)
    for n, e in conv.main_with_turns():
        notices = sum(1 for m in e.messages if harness.NOTICE_MARKER in harness.request_text({"messages": [m]}))
        assert notices <= 1, f"turn {n}: {notices} messages carry {harness.NOTICE_MARKER} (expected one notice)"
    harness.assert_recalled(conv, recall, needle)
    assert (home / "tencentdb-offload").is_dir(), "plugin data dir $HERMES_HOME/tencentdb-offload missing"
    if isolation == "host":
        assert harness.log_lines(home, "Plugin host started"), "Hermes ran the plugin in-process"
