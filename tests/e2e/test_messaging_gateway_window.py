"""End-to-end, Hermes 0.22's messaging gateway on a 100K window (issue 29's held-out shape, fewer
conversations): where the plugin's defaults trigger at 0.85, land at 0.35, keep the newest
unread results whole and cut a request the pool lets through past 0.88 of the window
(``settings/thresholds.py``). The built-in, the plugin without a Gateway and with the real one run
at once on the same workload as tests/e2e/test_messaging_gateway.py's side-by-side (three
~25 KB reads a turn, a restart halfway). Asked of the plugin: every turn answered, every
request at most 0.90 of the window, no more rewrites than the built-in, no more reads hidden.
Issue 55's bars too: every read shown whole, rewrites near the floor, cost at most 0.95x the
built-in's (a hidden read priced as read again), the real Gateway no dearer than none.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import measure  # noqa: E402
import real_gateway  # noqa: E402
import test_messaging_gateway as messaging  # noqa: E402

WINDOW, CONVERSATIONS, TURNS = 100_000, 12, 6

pytestmark = pytest.mark.skipif(not messaging.HERMES_VERSION.startswith("0.22"),
                                reason="the messaging gateway's 85K-128K defaults are Hermes 0.22's")


SHAPE = messaging.Shape(WINDOW, CONVERSATIONS, TURNS, int(WINDOW * 0.85))   # the bar: its trigger


def _run_arm(engine: str, tmp: Path, gateway_url: str = "off") -> measure.Row:
    return messaging._run_engine(engine, tmp, gateway_url=gateway_url, shape=SHAPE)


@pytest.fixture(scope="module")
def rows(tmp_path_factory, request):
    messaging._require_host()
    arms = {e: (e, tmp_path_factory.mktemp(e)) for e in ("builtin", "plugin")}
    out = real_gateway.at_once_with_gateway(_run_arm, arms, tmp_path_factory)
    measure.show(request, f"MESSAGING GATEWAY, {WINDOW:,} WINDOW hermes={messaging.HERMES_VERSION}: "
                 f"{CONVERSATIONS} conversations x {TURNS} turns (3 reads of ~25 KB each), restart "
                 "halfway; the plugin without a Gateway and with the real one", list(out.values()))
    return out


@pytest.fixture(params=["plugin", real_gateway.ARM])
def plugin(request, rows):
    return rows["plugin"] if request.param == "plugin" else real_gateway.arm(rows)


def test_the_workload_needs_compaction(rows):
    """Every conversation offers more than the window (about 1.3: a compaction at least);
    the built-in answers every turn."""
    assert not rows["builtin"].failed, rows["builtin"].failed[:6]
    for row in rows.values():
        assert row.min_offered > WINDOW, (row.engine, row.min_offered, row.failed[:6])


def test_every_turn_answered_and_never_over_the_window(plugin):
    measure.assert_answers_every_turn(plugin)
    measure.assert_never_over_the_window(plugin)


def test_every_request_at_most_090_of_the_window(plugin):
    measure.assert_every_request_under_the_headroom(plugin)


def test_never_over_the_trigger_after_a_compaction(plugin):
    measure.assert_never_over_the_trigger_after_a_compaction(plugin)


def test_rewrites_no_more_than_the_builtin(rows, plugin):
    measure.assert_rewrites_within(plugin, rows["builtin"], extra=1)


def test_hides_no_more_fresh_results_than_the_builtin(rows, plugin):
    measure.assert_hides_no_more(plugin, rows["builtin"])


# Issue 55's bars (test_messaging_gateway.py states them on 64K): every read shown whole,
# rewrites at most the floor + 0.5 and the built-in's, cost at most 0.95x the built-in's, the
# real Gateway's arm at most the arm without one.
def test_shows_every_read_whole(plugin):
    measure.assert_hides_none(plugin)


def test_rewrites_near_the_floor(rows, plugin):
    measure.assert_rewrites_near_the_floor(plugin, rows["builtin"])


def test_costs_at_most_095_of_the_builtin(rows, plugin):
    measure.assert_cost_within(plugin, rows["builtin"], messaging.MESSAGING_COST_SHARE)


@measure.unmet_on(measure.ISSUE_55, "issue 55: 1.004x-1.013x in five runs (2026-12-07): both arms "
                  "land at the same depth; the Gateway's arm carries its task canvas, written at "
                  "each compaction", flaky=True)
def test_real_gateway_costs_no_more_than_without_a_gateway(rows):
    measure.assert_cost_within(real_gateway.arm(rows), rows["plugin"], 1.00)
