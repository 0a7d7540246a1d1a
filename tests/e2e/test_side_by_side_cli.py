"""End-to-end, issue 15's yardstick for the CLI: one process per turn, built-in vs plugin.

Many people run Hermes one ``hermes chat -q`` process per turn (``--resume`` the id the last
turn printed). Each process reloads the history from state.db, so whatever an engine did only
in memory is gone at the next turn. This test runs the SAME session twice in one test, first
with Hermes' built-in compressor (``context.engine: compressor``), then with this plugin in
local mode (no Gateway), on the same fake model: READ_TURNS turns, each a parallel read of
READS files of ~25 KB (~18.9K tokens of tool results; every file carries a marker on its
middle line), on a 64K window (the host's minimum; the session offers > 2 windows), then
RECALL_TURNS turns that ask for the markers of the first files of the first turns (``DO recall
<id> <id>``: the plugin's ``tdai_read_cos``; the built-in has no such tool).

The engines' sessions run at the same time (``harness.at_once``), so a latency figure is one
of sessions sharing the machine. Figures (tests/e2e/measure.py) are printed side by side; each
of issue 15's bars is its own test on the one shared run. A marker is recallable when the recall turn's first request still
carries it, or the result of its ``tdai_read_cos`` call does.
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Dict, List

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402
import measure  # noqa: E402
import real_gateway  # noqa: E402
from tests.fakes.fake_llm import FakeLLM, text_of_content  # noqa: E402

HERMES_VERSION = harness.hermes_version() or "unknown"
CONTEXT, THRESHOLD = 64000, 0.75     # the default THRESHOLD: no landing may end over it
READS, READ_TURNS = 3, 7
RECALLS_PER_TURN, RECALL_TURNS = 2, 2

if not harness.hermes_bin().exists():  # pragma: no cover - wrong interpreter
    pytest.skip(f"hermes CLI not found next to {sys.executable}; run tests/e2e with the "
                "Hermes venv's python", allow_module_level=True)


def _recalled(turn: harness.Turn, needle_of: Dict[str, str]) -> Dict[str, bool]:
    """For every marker asked for in ``turn``: still in its first request, or returned by its
    tdai_read_cos call."""
    asked = turn.prompt.split()[2:]
    first = harness.request_text(turn.main[0].body) if turn.main else ""
    results: Dict[str, str] = {}
    for e in turn.main:
        for cid, name, args in e.reply_tool_calls:
            if name == "tdai_read_cos":
                results[args.get("tool_call_id")] = cid
    out = {}
    for read_id in asked:
        needle = needle_of[read_id]
        got = ""
        for e in turn.main:
            for m in e.messages:
                if m.get("role") == "tool" and m.get("tool_call_id") == results.get(read_id):
                    got = text_of_content(m.get("content"))
        out[needle] = needle in first or needle in got
    return out


def read_turns(conv: harness.Conversation, supply: harness.FileSupply, turns: int,
               failed: List[str]) -> List[tuple]:
    """``turns`` turns of READS parallel reads (a turn not answered is added to ``failed``);
    the first file of each."""
    first: List[tuple] = []
    for _ in range(turns):
        batch = supply.take(READS)
        first.append(batch[0])
        turn = conv.say("DO read " + " ".join(p for p, _ in batch), expect_ok=False)
        if f"done: read {READS} file(s)" not in turn.result.stdout:
            failed.append(f"turn {turn.number}: {turn.result.describe(300)}")
    return first


def _run_engine(engine: str, tmp: Path, gateway_url: str = "off") -> measure.Row:
    """One engine's row: "builtin", "plugin" (no Gateway) or "plugin+gateway" (``gateway_url``)."""
    supply = harness.FileSupply(tmp / "files", tag=f"cli{engine[:2]}")
    t0 = time.monotonic()
    with FakeLLM() as llm:
        if engine.startswith("plugin"):
            home = harness.make_home(tmp, llm.url, context_length=CONTEXT, env={  # default trigger
                "TENCENTDB_OFFLOAD_GATEWAY_URL": gateway_url})
        else:
            home = harness.make_home(tmp, llm.url, context_length=CONTEXT, engine="compressor",
                                     enabled_plugins=())
        conv = harness.Conversation(llm, home, timeout=300)
        failed: List[str] = []
        first_files = read_turns(conv, supply, READ_TURNS, failed)
        call_of = {args.get("path"): cid for cid, name, args in llm.tool_calls_issued if name == "read_file"}
        wanted = [call_of[p] for p, _ in first_files[:RECALLS_PER_TURN * RECALL_TURNS]]
        needle_of = {call_of[p]: n for p, n in supply.files if p in call_of}
        markers: Dict[str, bool] = {}
        for k in range(RECALL_TURNS):
            ids = wanted[k * RECALLS_PER_TURN:(k + 1) * RECALLS_PER_TURN]
            turn = conv.say("DO recall " + " ".join(ids), expect_ok=False)
            if "recalled: " not in turn.result.stdout:
                failed.append(f"turn {turn.number}: {turn.result.describe(300)}")
            markers.update(_recalled(turn, needle_of))
        exchanges = llm.exchanges
    turns = READ_TURNS + RECALL_TURNS
    lost = sorted(n for n, ok in markers.items() if not ok)
    extra = {"test markers that cannot be recalled": f"{len(lost)} of {len(markers)}",
             "turn latency (process) median": f"{measure.median(t.result.seconds for t in conv.turns):.1f} s",
             "wall time": f"{time.monotonic() - t0:.0f} s"}
    reads = {"session": {cid: args["path"] for cid, name, args in llm.tool_calls_issued if name == "read_file"}}
    row = measure.analyse(engine, {"session": exchanges}, window=CONTEXT, reads=reads,
                          trigger=int(THRESHOLD * CONTEXT) if engine.startswith("plugin")
                          else measure.builtin_trigger(CONTEXT),
                          turns=turns, answered=turns - len(failed), failed=failed, extra=extra)
    row.markers = markers
    row.summary = conv.summary()
    row.reasons = harness.compaction_reasons(home) if engine.startswith("plugin") else []
    row.prefix_breaks = harness.prefix_breaks(conv)
    return row


@pytest.fixture(scope="module")
def cli(tmp_path_factory, request):
    """Every engine's row from one test run (all at once: the built-in, the plugin without a Gateway, and
    with the real Gateway where it is beside the checkout, on 0.22), printed side by side."""
    if HERMES_VERSION.startswith("0.17"):
        pytest.skip("issue 15's bars are for 0.19 and 0.22 (0.17 does not replay a turn's pre_llm_call "
                    "context, so with the plugin every turn would count as a rewrite)")
    problem = harness.plugin_problem()
    if problem:
        pytest.fail(problem)
    arms = {e: (e, tmp_path_factory.mktemp(e)) for e in ("builtin", "plugin")}
    rows = real_gateway.at_once_with_gateway(_run_engine, arms, tmp_path_factory,
                                              real_gateway.CURRENT_HOST)   # side by side
    measure.show(request, f"CLI SIDE-BY-SIDE hermes={HERMES_VERSION}: one process per turn, {READ_TURNS} turns "
                 f"of {READS} reads of ~25 KB + {RECALL_TURNS} recall turns, {CONTEXT:,} window; "
                 "the plugin without a Gateway and with the real one",
                 list(rows.values()),
                 "\n" + "\n".join(f"{e} requests:\n" + rows[e].summary for e in rows))
    return rows


@pytest.fixture
def with_gateway(cli):
    """The plugin's row with the real Gateway (skips where none is beside us, and on 0.19)."""
    return real_gateway.arm(cli, real_gateway.CURRENT_HOST)


def test_cli_workload_is_a_fair_baseline(cli):
    measure.assert_fair_baseline(cli, CONTEXT)


def test_cli_plugin_answers_every_turn(cli):
    measure.assert_answers_every_turn(cli["plugin"])


def test_cli_plugin_never_over_the_window(cli):
    measure.assert_never_over_the_window(cli["plugin"])


def test_cli_plugin_every_request_at_most_090_of_the_window(cli):
    measure.assert_every_request_under_the_headroom(cli["plugin"])


def test_cli_plugin_never_over_the_trigger_after_a_compaction(cli):
    measure.assert_never_over_the_trigger_after_a_compaction(cli["plugin"])


def test_cli_plugin_rewrites_no_more_than_the_builtin(cli):
    """No more than the built-in's, or than the fewest any engine needs at <= 0.90 of the
    window with every read whole (the built-in makes fewer by sending turn 7 at 0.99)."""
    measure.assert_rewrites_within(cli["plugin"], cli["builtin"])


def test_cli_plugin_costs_no_more_than_the_builtin(cli):
    measure.assert_cost_within(cli["plugin"], cli["builtin"])


def test_cli_plugin_read_turns_cost_no_more_than_the_builtin(cli):
    """Issue 29 on the work both engines do alike: the read turns."""
    measure.assert_read_turns_cost_within(cli["plugin"], cli["builtin"])


@measure.unmet_on(["0.19"], "issue 29: files no request carried whole, 6 vs 0 on 0.19, where the built-in "
                  "shows every read whole by letting requests run to 1.16 of the window (2 of its 18 "
                  "requests over it)")
def test_cli_plugin_hides_no_more_fresh_results_than_the_builtin(cli):
    measure.assert_hides_no_more(cli["plugin"], cli["builtin"])


def test_cli_plugin_compacts_for_no_pause_between_quick_turns(cli):
    """Idle compaction is on (the default cache TTL, 300 s) but no turn here waits that long:
    it must not fire on a warm cache (the session's compactions are all for the threshold)."""
    assert cli["plugin"].reasons and "idle" not in cli["plugin"].reasons, cli["plugin"].reasons


def test_cli_plugin_recalls_every_marker(cli):
    markers = cli["plugin"].markers
    assert len(markers) == RECALLS_PER_TURN * RECALL_TURNS and all(markers.values()), json.dumps(markers)


def test_cli_plugin_compacted_prefix_survives_the_next_process(cli):
    """The turn after a compaction starts with what the compacted turn last sent (issue 55)."""
    assert not cli["plugin"].prefix_breaks, "\n".join(cli["plugin"].prefix_breaks) + "\n" + cli["plugin"].summary


# The same bars with the real TencentDB Gateway compacting (issue 29), on the current host.
def test_cli_real_gateway_answers_every_turn(with_gateway):
    measure.assert_answers_every_turn(with_gateway)


def test_cli_real_gateway_never_over_the_window(with_gateway):
    measure.assert_never_over_the_window(with_gateway)


def test_cli_real_gateway_every_request_at_most_090_of_the_window(with_gateway):
    measure.assert_every_request_under_the_headroom(with_gateway)


def test_cli_real_gateway_never_over_the_trigger_after_a_compaction(with_gateway):
    measure.assert_never_over_the_trigger_after_a_compaction(with_gateway)


def test_cli_real_gateway_rewrites_no_more_than_the_builtin(cli, with_gateway):
    measure.assert_rewrites_within(with_gateway, cli["builtin"])


def test_cli_real_gateway_costs_no_more_than_the_builtin(cli, with_gateway):
    measure.assert_cost_within(with_gateway, cli["builtin"])


def test_cli_real_gateway_hides_no_more_fresh_results_than_the_builtin(cli, with_gateway):
    measure.assert_hides_no_more(with_gateway, cli["builtin"])


def test_cli_real_gateway_compacts_for_no_pause_between_quick_turns(with_gateway):
    assert with_gateway.reasons and "idle" not in with_gateway.reasons, with_gateway.reasons


def test_cli_real_gateway_recalls_every_marker(with_gateway):
    markers = with_gateway.markers
    assert len(markers) == RECALLS_PER_TURN * RECALL_TURNS and all(markers.values()), json.dumps(markers)


def test_cli_real_gateway_compacted_prefix_survives_the_next_process(with_gateway):
    assert not with_gateway.prefix_breaks, "\n".join(with_gateway.prefix_breaks) + "\n" + with_gateway.summary


# Issue 55's bars (done when), at each engine's defaults, beside the built-in of the same run:
# rewrites at most the floor + 0.5 and the built-in's, cost at most 0.92x the built-in's, the
# real Gateway's arm at most the one without. Hermes 0.22; 0.19 keeps the bars above.
CLI_COST_SHARE = 0.92


@pytest.fixture
def current(cli):
    return measure.for_issue_55(cli)


@measure.unmet_on(measure.ISSUE_55, "issue 55: 3.0 rewrites, the floor (3.0), but over the built-in's 2.0, "
                  "which runs to 1.00 of the window: on this workload no engine rewrites less at "
                  "<= 0.90 with every read whole (2026-12-07)")
def test_cli_plugin_rewrites_near_the_floor(current):
    measure.assert_rewrites_near_the_floor(current["plugin"], current["builtin"])


@measure.unmet_on(measure.ISSUE_55, "issue 55: 0.256M against the built-in's 0.276M with its 4 hidden "
                  "reads priced as read again (0.93x), the plugin at the floor's 3 rewrites with none "
                  "hidden: the cheapest any schedule of 3 can cost on this session (0.928x, "
                  "bench/rewrite_schedules.py); 0.92x needs 4, over the floor + 0.5 (2026-12-07)")
def test_cli_plugin_costs_at_most_092_of_the_builtin(current):
    measure.assert_cost_within(current["plugin"], current["builtin"], CLI_COST_SHARE)


@measure.unmet_on(measure.ISSUE_55, "issue 55: as without a Gateway (2026-12-07)")
def test_cli_real_gateway_rewrites_near_the_floor(current, with_gateway):
    measure.assert_rewrites_near_the_floor(with_gateway, current["builtin"])


@measure.unmet_on(measure.ISSUE_55, "issue 55: as without a Gateway (2026-12-07)")
def test_cli_real_gateway_costs_at_most_092_of_the_builtin(current, with_gateway):
    measure.assert_cost_within(with_gateway, current["builtin"], CLI_COST_SHARE)


@measure.unmet_on(measure.ISSUE_55, "issue 55: seen both ways: 0.26M and 0.26M (2026-12-07, landing on "
                  "the system prompt and tools before the step), 0.25M against 0.24M before, where "
                  "the Gateway's arm landed 1-2K tokens higher (its canvas)", flaky=True)
def test_cli_real_gateway_costs_no_more_than_without_a_gateway(current, with_gateway):
    """Its /compact reply is taken only where it lands as deep as the local plan."""
    measure.assert_cost_within(with_gateway, current["plugin"], 1.00)
