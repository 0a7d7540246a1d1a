"""End-to-end, Hermes 0.22: the host's compression pool refuses every compaction.

0.22 runs every compaction on a 4-worker pool shared by the process and refuses new ones while
all four are busy ("Context compression pool saturated"); the request then goes out as it is.
In the messaging gateway that happened for real (8 conversations compacting at once, one
request at 1.18 of the window). Here the refusal is made permanent in the host itself (a
``sitecustomize`` on the child's PYTHONPATH replaces 0.22's admission check), and the per-turn
CLI session of tests/e2e/test_side_by_side_cli.py runs with the built-in and with the plugin
(no Gateway) at once: the built-in's requests pass the window; the plugin's ``select_context``
cuts each request that would pass ``REQUEST_CEILING`` of it (0.95), for that request alone, and every
marker stays recallable.
"""
from __future__ import annotations

import sys
import textwrap
from pathlib import Path
from typing import Dict, List

import importlib

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402
import measure  # noqa: E402
from test_side_by_side_cli import CONTEXT, READS, THRESHOLD, _recalled, read_turns  # noqa: E402
from tests.conftest import load_plugin  # noqa: E402
from tests.fakes.fake_llm import FakeLLM  # noqa: E402

HERMES_VERSION = harness.hermes_version() or "unknown"
REQUEST_CEILING = importlib.import_module(load_plugin().__name__ + ".compaction.request_cut").REQUEST_CEILING
READ_TURNS, RECALLS = 5, 3
REFUSE = textwrap.dedent('''
    # the test's stand-in for a saturated pool: 0.22's admission check always says no
    import agent.conversation_compression as _cc
    _cc._try_admit_compression_job = lambda: False
''')

pytestmark = pytest.mark.skipif(not HERMES_VERSION.startswith("0.22"),
                                reason="the shared compression pool and select_context are 0.22's")


def _run_engine(engine: str, tmp: Path) -> measure.Row:
    site = tmp / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(REFUSE)
    supply = harness.FileSupply(tmp / "files", tag=f"pr{engine[:2]}")
    with FakeLLM() as llm:
        if engine == "plugin":
            home = harness.make_home(tmp, llm.url, context_length=CONTEXT,
                                     env={"TENCENTDB_OFFLOAD_GATEWAY_URL": "off"})
        else:
            home = harness.make_home(tmp, llm.url, context_length=CONTEXT, engine="compressor",
                                     enabled_plugins=())
        conv = harness.Conversation(llm, home, timeout=300, env={"PYTHONPATH": str(site)})
        failed: List[str] = []
        first = read_turns(conv, supply, READ_TURNS, failed)
        call_of = {a.get("path"): cid for cid, name, a in llm.tool_calls_issued if name == "read_file"}
        needle_of = {call_of[p]: n for p, n in supply.files if p in call_of}
        markers: Dict[str, bool] = {}
        if engine == "plugin":
            turn = conv.say("DO recall " + " ".join(call_of[p] for p, _ in first[:RECALLS]),
                            expect_ok=False)
            markers = _recalled(turn, needle_of)
        exchanges = llm.exchanges
    refused = len(harness.log_lines(home, "compression pool saturated"))
    turns = len(conv.turns)
    row = measure.analyse(engine, {"session": exchanges}, window=CONTEXT,
                          trigger=int(THRESHOLD * CONTEXT) if engine == "plugin"
                          else measure.builtin_trigger(CONTEXT),
                          turns=turns, answered=turns - len(failed), failed=failed,
                          extra={"'pool saturated' log lines": str(refused)})
    row.markers = markers
    return row


@pytest.fixture(scope="module")
def refused(tmp_path_factory, request):
    problem = harness.plugin_problem()
    if problem:
        pytest.fail(problem)
    rows = harness.at_once(_run_engine, {e: (e, tmp_path_factory.mktemp(e)) for e in ("builtin", "plugin")})
    measure.show(request, f"COMPRESSION POOL REFUSING hermes={HERMES_VERSION}: {READ_TURNS} turns of "
                 f"{READS} reads, {CONTEXT:,} window", [rows["builtin"], rows["plugin"]])
    return rows


def test_the_host_refused_and_the_builtin_went_over_the_window(refused):
    """The scenario is real: the host refused compactions, and without a cut a request passes."""
    for row in refused.values():
        assert int(row.extra["'pool saturated' log lines"]) > 0, row.lines()
    assert refused["builtin"].over_window > 0, refused["builtin"].lines()


def test_the_plugin_never_goes_over_the_window(refused):
    measure.assert_never_over_the_window(refused["plugin"])
    assert refused["plugin"].largest_share <= REQUEST_CEILING, refused["plugin"].lines()


def test_the_plugin_answers_every_turn_and_recalls_every_marker(refused):
    measure.assert_answers_every_turn(refused["plugin"])
    markers = refused["plugin"].markers
    assert markers and all(markers.values()), markers
