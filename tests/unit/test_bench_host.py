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


# -- bench/messaging_load.py -------------------------------------------------------------------

import messaging_load  # noqa: E402


def test_percentile_is_nearest_rank():
    values = [float(v) for v in range(1, 21)]           # 1..20 s
    assert (messaging_load.percentile(values, 50), messaging_load.percentile(values, 95)) == (10.0, 19.0)


def test_flat_bounds_rss_share_and_fd_count():
    warm = {"rss_kb": 200_000, "fds": 40, "threads": 30}
    assert messaging_load.flat(warm, {"rss_kb": 220_000, "fds": 45}) == {"rss": True, "fds": True}
    assert messaging_load.flat(warm, {"rss_kb": 220_001, "fds": 46}) == {"rss": False, "fds": False}
    assert messaging_load.flat(warm, {"rss_kb": 150_000, "fds": 10}) == {"rss": True, "fds": True}


def _run(p50, p95, warm_rss, end_rss, warm_fds, end_fds, cost, cpu=0.5):
    warm = {"done": 20, "rss_kb": warm_rss, "fds": warm_fds, "threads": 30}
    end = {"done": 100, "rss_kb": end_rss, "fds": end_fds, "threads": 31}
    return {"turns": 300, "answered": 300, "p50": p50, "p95": p95, "max": p95 + 1, "warm_after": 20,
            "cpu_per_turn": cpu,
            "warm": warm, "end": end, "series": [dict(warm, done=50)], "cost": cost,
            "cached_share": 0.5, "rewrites": 1.0, "over_window": 0, "offered_windows": 1.2}


def test_messaging_rows_latency_beside_builtin_and_flatness_per_engine():
    runs = {"plugin": _run(2.0, 5.0, 204_800, 235_520, 50, 56, 1.0e6),
            "builtin": _run(1.5, 4.0, 204_800, 215_040, 30, 30, 2.0e6)}
    rows = {r["id"]: r for r in messaging_load.engine_rows("0.22.2", "100 conversations × 3 turns, 6 at once", runs)}
    p95 = rows["messaging_load/0.22.2/latency/p95"]
    assert (p95["median"], p95["floor"], p95["floor_what"], p95["met"]) == (5.0, 4.0, "built-in p95", None)
    assert rows["messaging_load/0.22.2/latency/p50"]["median"] == 2.0
    rss = rows["messaging_load/0.22.2/rss/plugin"]
    assert (rss["median"], rss["floor"], rss["met"]) == (230.0, 200.0, False)     # +15 %
    assert rows["messaging_load/0.22.2/rss/builtin"]["met"] is True                # +5 %
    assert rows["messaging_load/0.22.2/fds/plugin"]["met"] is False                # +6
    assert rows["messaging_load/0.22.2/fds/builtin"]["met"] is True
    assert rows["messaging_load/0.22.2/cost"]["ratio"] == 0.5
    assert "messaging_load/0.22.2/cpu" not in rows                                # no local run
    gateway_cpu = rows["messaging_load/0.22.2/cpu/gateway"]                        # reported
    assert (gateway_cpu["median"], gateway_cpu["floor"], gateway_cpu["met"]) == (0.5, 0.5, None)
    runs[messaging_load.LOCAL] = _run(2.0, 5.0, 204_800, 215_040, 30, 30, 1.0e6, cpu=0.56)

    def cpu_bar():
        return next(r for r in messaging_load.engine_rows("0.22.2", "x", runs)
                    if r["id"] == "messaging_load/0.22.2/cpu")
    assert (cpu_bar()["ratio"], cpu_bar()["met"]) == (1.12, False)                 # 0.56 vs 0.5 s
    runs[messaging_load.LOCAL]["cpu_per_turn"] = 0.55
    assert cpu_bar()["met"] is True                                                # 1.10x
    del runs["builtin"]["cpu_per_turn"]                                            # an older result
    assert not any("/cpu" in r["id"] for r in messaging_load.engine_rows("0.22.2", "x", runs))
    runs["builtin"]["cpu_per_turn"] = 0.5
    beyond = rows["messaging_load/0.22.2/rss/plugin-beyond-builtin"]                # 30 vs 10 MB grown
    assert (beyond["median"], beyond["floor"], beyond["met"]) == (30.0, 10.0, False)
    runs["plugin"]["end"]["rss_kb"] = 204_800 + 18 * 1024                          # 18 ≤ 10 + 8
    again = messaging_load.engine_rows("0.22.2", "x", runs)
    assert next(r for r in again if r["id"].endswith("plugin-beyond-builtin"))["met"] is True
    assert report._bar_value(rss) == (1.5, 1.5)                                    # 30 MB of 20 allowed
    results = {"machine": {"cpu": "x", "cores": 2, "memory": "1", "python": "3"}, "started": "now",
               "mode": "full", "seconds": 1.0, "rows": list(rows.values())}
    assert "| messaging gateway RSS | Hermes 0.22.2, 100 conversations × 3 turns, 6 at once: plugin, " \
           "end vs after conversation 20 | 230 MB | – | 200 MB (after warm-up) | 1.15× | ≤ +10 % | **no** |" \
           in report.markdown(results)


# -- bench/per_turn_cli.py ---------------------------------------------------------------------

import per_turn_cli  # noqa: E402


def test_per_turn_rows_judge_cpu_and_latency_by_the_builtin_and_gateways_by_no_gateway():
    def arm(seconds, cpu):
        return {"seconds": seconds, "cpu": cpu, "answered": len(seconds)}
    runs = {"builtin": arm([4.0, 5.0, 6.0], [3.0, 3.0, 3.0]),
            "plugin": arm([4.0, 5.4, 6.0], [3.4, 3.4, 3.0]),      # medians 5.4 / 3.4: 1.08x, 1.13x
            "hung": arm([4.0, 6.0, 6.9], [3.0, 3.0, 3.0]),        # 16.9 s of 15.4 s: 1.097x
            "flaky": arm([5.0, 6.0, 7.0], [3.0, 3.0, 3.0])}       # 18.0 s: 1.17x
    rows = {r["id"]: r for r in per_turn_cli.host_rows("0.19.0", runs)}
    assert rows["per_turn_cli/0.19.0/seconds"]["met"] is True
    assert rows["per_turn_cli/0.19.0/cpu"]["met"] is False
    assert (rows["per_turn_cli/0.19.0/gateway/hung"]["median"], rows["per_turn_cli/0.19.0/gateway/hung"]["met"]) \
        == (16.9, True)
    assert rows["per_turn_cli/0.19.0/gateway/flaky"]["met"] is False
    assert per_turn_cli.median([3.0, 1.0, 2.0, 10.0]) == 2.5


def test_per_turn_rows_compare_only_turns_every_arm_answered():
    """A turn an engine failed (a request over the window) ends early and would flatter its
    latency: it is left out of every arm's median, and the no-op plugin's floor is shown."""
    def arm(seconds, ok):
        return {"seconds": seconds, "cpu": seconds, "ok": ok, "answered": sum(ok)}
    runs = {"builtin": arm([5.0, 5.0, 1.0, 1.0], [True, True, False, False]),
            "noop": arm([5.0, 5.0, 5.0, 5.0], [True] * 4),
            "plugin": arm([5.4, 5.4, 5.4, 5.4], [True] * 4),
            "hung": arm([5.4] * 4, [True] * 4), "flaky": arm([5.4] * 4, [True] * 4)}
    rows = {r["id"]: r for r in per_turn_cli.host_rows("0.22.2", runs)}
    lat = rows["per_turn_cli/0.22.2/seconds"]
    assert (lat["median"], lat["floor"], lat["met"]) == (5.4, 5.0, True)     # 1.08x, not 5.4 / 3.0
    assert "no-op plugin enabled 5.00 s (1.00x" in lat["note"] and "the 2 turns all answered" in lat["note"]
