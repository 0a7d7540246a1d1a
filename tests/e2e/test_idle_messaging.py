"""End-to-end, issue 31 in the messaging gateway: users who pause longer than the provider's
cache TTL between turns.

The messaging side-by-side of tests/e2e/test_messaging_gateway.py (SBS_CONVERSATIONS
conversations at once on one ``hermes gateway`` per engine, SBS_TURNS turns of SBS_READS
~25 KB reads, a 64K window, a restart halfway, the fake Gateway with a realistic slow
``/compact``), with a PAUSE before every turn of every conversation, longer than TTL. The
plugin runs without a Gateway and, where ``../shared/gateway`` is beside the checkout, with the
real TencentDB Gateway. The
built-in runs with ``compression.idle_compact_after_seconds: TTL`` (it measures the pause on
the agent, and the gateway builds an agent per request), the plugin with
``TENCENTDB_OFFLOAD_CACHE_TTL_S=TTL``; both priced with a cache that expires after TTL seconds
idle. Bars: cost <= 0.85x the built-in's; every turn answered; no request over the window.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402
import measure  # noqa: E402
import real_gateway  # noqa: E402
from test_messaging_gateway import (SBS_CONVERSATIONS, SBS_READS, SBS_TURNS, CONTEXT,  # noqa: E402
                                    _require_host, _run_engine)

HERMES_VERSION = harness.hermes_version() or "unknown"
TTL, PAUSE = 3, 4          # seconds: every turn starts on a cold cache


def _run(engine: str, tmp: Path, gateway_url: str = "off") -> measure.Row:
    return _run_engine(engine, tmp, PAUSE, TTL, gateway_url)


@pytest.fixture(scope="module")
def idle_sbs(tmp_path_factory, request):
    _require_host()
    if not HERMES_VERSION.startswith(("0.19", "0.22")):
        pytest.skip("issue 31's bars are for 0.19 and 0.22")
    arms = {e: (e, tmp_path_factory.mktemp(e)) for e in ("builtin", "plugin")}
    rows = real_gateway.at_once_with_gateway(_run, arms, tmp_path_factory, real_gateway.CURRENT_HOST)
    measure.show(request, f"IDLE MESSAGING hermes={HERMES_VERSION}: {SBS_CONVERSATIONS} conversations x "
                 f"{SBS_TURNS} turns ({SBS_READS} reads of ~25 KB each), a {PAUSE} s pause before each "
                 f"turn, cache TTL {TTL} s (built-in: idle_compact_after_seconds {TTL}), {CONTEXT:,} window; "
                 "the plugin without a Gateway and with the real one", list(rows.values()))
    return rows


@pytest.fixture(params=["plugin", real_gateway.ARM])
def plugin_row(request, idle_sbs):
    """The plugin's row without a Gateway, then with the real one (skipped where absent, and on 0.19)."""
    return idle_sbs["plugin"] if request.param == "plugin" else real_gateway.arm(idle_sbs, real_gateway.CURRENT_HOST)


def test_idle_messaging_plugin_answers_every_turn(plugin_row):
    measure.assert_answers_every_turn(plugin_row)


def test_idle_messaging_plugin_never_over_the_window(plugin_row):
    measure.assert_never_over_the_window(plugin_row)


def test_idle_messaging_plugin_costs_at_most_085_of_the_builtin(idle_sbs, plugin_row):
    measure.assert_cost_within(plugin_row, idle_sbs["builtin"], share=0.85)
