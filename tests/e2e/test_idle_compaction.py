"""End-to-end, issue 31: a user who pauses longer than the provider's cache TTL between turns.

The per-turn CLI session of tests/e2e/test_side_by_side_cli.py (one ``hermes chat -q`` process
per turn, READ_TURNS turns of READS parallel ~25 KB reads, then RECALL_TURNS recall turns, a 64K
window), with a PAUSE before every turn, longer than TTL. The plugin runs without a Gateway
and, where ``../shared/gateway`` is beside the checkout, with the real TencentDB Gateway. Priced with a cache that
expires after TTL seconds idle (``measure.analyse(ttl=)``): a turn's first request reads
nothing from the cache whatever the engine does. The built-in runs with its own idle compaction
on (``compression.idle_compact_after_seconds: TTL``; 0.19 has no such setting and ignores it),
the plugin with
``TENCENTDB_OFFLOAD_CACHE_TTL_S=TTL``. Bars: cost <= 0.85x the built-in's; no request over the
window; every marker recallable. The sessions run at the same time (``harness.at_once``): the
pauses overlap.
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
from test_side_by_side_cli import CONTEXT, READS, READ_TURNS, RECALL_TURNS, RECALLS_PER_TURN, THRESHOLD, _recalled  # noqa: E402
from tests.fakes.fake_llm import FakeLLM  # noqa: E402

HERMES_VERSION = harness.hermes_version() or "unknown"
TTL, PAUSE = 2, 1.5        # seconds: every turn starts on a cold cache (a turn's process starts in ~2 s more)


def _home(engine: str, tmp: Path, url: str, gateway_url: str) -> Path:
    if engine.startswith("plugin"):
        return harness.make_home(tmp, url, context_length=CONTEXT, env={
            "TENCENTDB_OFFLOAD_GATEWAY_URL": gateway_url, "TENCENTDB_OFFLOAD_CACHE_TTL_S": str(TTL)})
    return harness.make_home(tmp, url, context_length=CONTEXT, engine="compressor", enabled_plugins=(),
                             extra_config={"compression": {"idle_compact_after_seconds": TTL}})


def _say(conv: harness.Conversation, prompt: str, failed: List[str], ok: str) -> harness.Turn:
    time.sleep(PAUSE)
    turn = conv.say(prompt, expect_ok=False)
    if ok not in turn.result.stdout:
        failed.append(f"turn {turn.number}: {turn.result.describe(300)}")
    return turn


def _run_engine(engine: str, tmp: Path, gateway_url: str = "off") -> measure.Row:
    """One engine's row: "builtin", "plugin" (no Gateway) or "plugin+gateway" (``gateway_url``),
    PAUSE before each turn, priced with a cache that expires after TTL seconds idle."""
    supply = harness.FileSupply(tmp / "files", tag=f"idle{engine[:2]}")
    with FakeLLM() as llm:
        conv = harness.Conversation(llm, _home(engine, tmp, llm.url, gateway_url), timeout=300)
        failed: List[str] = []
        first_files: List[tuple] = []
        for _ in range(READ_TURNS):
            batch = supply.take(READS)
            first_files.append(batch[0])
            _say(conv, "DO read " + " ".join(p for p, _ in batch), failed, f"done: read {READS} file(s)")
        call_of = {args.get("path"): cid for cid, name, args in llm.tool_calls_issued if name == "read_file"}
        # a file never read (its turn failed: see the answers bar) cannot be asked for
        wanted = [call_of[p] for p, _ in first_files[:RECALLS_PER_TURN * RECALL_TURNS] if p in call_of]
        needle_of = {call_of[p]: n for p, n in supply.files if p in call_of}
        markers: Dict[str, bool] = {}
        for k in range(RECALL_TURNS):
            ids = wanted[k * RECALLS_PER_TURN:(k + 1) * RECALLS_PER_TURN]
            markers.update(_recalled(_say(conv, "DO recall " + " ".join(ids), failed, "recalled: "),
                                     needle_of))
        exchanges = llm.exchanges
    turns = READ_TURNS + RECALL_TURNS
    lost = sorted(n for n, ok in markers.items() if not ok)
    reads = {"session": {cid: args["path"] for cid, name, args in llm.tool_calls_issued if name == "read_file"}}
    row = measure.analyse(engine, {"session": exchanges}, window=CONTEXT, reads=reads, ttl=TTL,
                          trigger=int(THRESHOLD * CONTEXT) if engine.startswith("plugin")
                          else measure.builtin_trigger(CONTEXT),
                          turns=turns, answered=turns - len(failed), failed=failed,
                          extra={"test markers that cannot be recalled": f"{len(lost)} of {len(markers)}"})
    row.markers = markers
    row.summary = conv.summary()
    return row


@pytest.fixture(scope="module")
def idle(tmp_path_factory, request):
    """Every session of this module in one run, all at once (a paused session mostly waits:
    the others use the cores meanwhile): the built-in, the plugin without a Gateway and with
    the real one. Short pauses (a new process per turn, the default 300 s TTL) are
    test_side_by_side_cli's sessions: no idle compaction may fire there."""
    if not harness.hermes_bin().exists():
        pytest.skip(f"hermes CLI not found next to {sys.executable}")
    if not HERMES_VERSION.startswith(("0.19", "0.22")):
        pytest.skip("issue 31's bars are for 0.19 and 0.22")
    problem = harness.plugin_problem()
    if problem:
        pytest.fail(problem)
    arms = {e: (e, tmp_path_factory.mktemp(e)) for e in ("builtin", "plugin")}
    rows = real_gateway.at_once_with_gateway(_run_engine, arms, tmp_path_factory,
                                              real_gateway.CURRENT_HOST)
    measure.show(request, f"IDLE COMPACTION hermes={HERMES_VERSION}: one process per turn, a {PAUSE} s pause "
                 f"before each turn, cache TTL {TTL} s (built-in: idle_compact_after_seconds {TTL})",
                 list(rows.values()),
                 "\n" + "\n".join(f"{e} requests:\n" + rows[e].summary for e in rows))
    return rows


@pytest.fixture
def with_gateway(idle):
    """The plugin's row with the real Gateway (skips where none is beside us, and on 0.19)."""
    return real_gateway.arm(idle, real_gateway.CURRENT_HOST)


def test_idle_plugin_answers_every_turn(idle):
    measure.assert_answers_every_turn(idle["plugin"])


def test_idle_plugin_never_over_the_window(idle):
    measure.assert_never_over_the_window(idle["plugin"])


def test_idle_plugin_recalls_every_marker(idle):
    markers = idle["plugin"].markers
    assert len(markers) == RECALLS_PER_TURN * RECALL_TURNS and all(markers.values()), json.dumps(markers)


def test_idle_plugin_costs_at_most_085_of_the_builtin(idle):
    measure.assert_cost_within(idle["plugin"], idle["builtin"], share=0.85)


# The same bars with the real TencentDB Gateway compacting.
def test_idle_real_gateway_answers_every_turn(with_gateway):
    measure.assert_answers_every_turn(with_gateway)


def test_idle_real_gateway_never_over_the_window(with_gateway):
    measure.assert_never_over_the_window(with_gateway)


def test_idle_real_gateway_recalls_every_marker(with_gateway):
    markers = with_gateway.markers
    assert len(markers) == RECALLS_PER_TURN * RECALL_TURNS and all(markers.values()), json.dumps(markers)


def test_idle_real_gateway_costs_at_most_085_of_the_builtin(idle, with_gateway):
    measure.assert_cost_within(with_gateway, idle["builtin"], share=0.85)
