"""The pure parts of the host benches: bench/host_hooks.py (hooks through Hermes' plugin
manager beside a no-op plugin) and bench/messaging_load.py (one messaging gateway under load):
percentiles, the verdicts, the report rows. The timing itself runs in ``bench/run.py``."""
from __future__ import annotations

import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import host_hooks  # noqa: E402
import report  # noqa: E402


def test_stats_are_nearest_rank_in_microseconds():
    got = host_hooks.stats([i * 1000 for i in range(1, 201)])      # 1..200 µs
    assert (got["p50"], got["p99"], got["max"], got["n"]) == (100.0, 198.0, 200.0, 200)


def test_stats_p99_of_few_samples_is_the_slowest():
    assert host_hooks.stats([5000, 1000, 3000])["p99"] == 5.0


def test_hook_target_is_floor_plus_one_millisecond():
    floor = {"p50": 10.0, "p99": 200.0, "max": 300.0, "n": 100}
    assert host_hooks.judge({"p50": 50.0, "p99": 1200.0, "max": 1500.0, "n": 100}, floor)
    assert not host_hooks.judge({"p50": 50.0, "p99": 1200.1, "max": 1500.0, "n": 100}, floor)


def test_hook_row_names_host_floor_and_verdict_and_renders():
    floor = {"p50": 10.0, "p99": 200.0, "max": 300.0, "n": 300}
    plugin = {"p50": 40.0, "p99": 2500.0, "max": 4000.0, "n": 300}
    r = host_hooks.host_row("0.22.2", "post_tool_call/100 KB", "result 100 KB, Gateway up", plugin,
                            floor, "archived 210 of 210")
    assert r["id"] == "host_hooks/0.22.2/post_tool_call/100 KB"
    assert (r["median"], r["p99"], r["floor"], r["met"]) == (40.0, 2500.0, 200.0, False)
    assert r["what"] == "post_tool_call via Hermes 0.22.2 plugin manager"
    assert "no-op plugin p50 / p99 / max 10.0 / 200.0 / 300.0" in r["note"] and "archived 210" in r["note"]
    results = {"machine": {"cpu": "x", "cores": 2, "memory": "1", "python": "3"}, "started": "now",
               "mode": "full", "seconds": 1.0, "rows": [r]}
    md = report.markdown(results)
    assert "| post_tool_call via Hermes 0.22.2 plugin manager | result 100 KB, Gateway up | 40.0 µs |" \
           " 2.50 ms | 200 µs (no-op plugin p99) | 12.50× | p99 ≤ floor + 1 ms | **no** |" in md
    assert report._bar_value(r) == (40.0 / 1200.0, 2500.0 / 1200.0)
