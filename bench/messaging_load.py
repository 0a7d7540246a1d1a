#!/usr/bin/env python3
"""One Hermes messaging gateway under load: CONVERSATIONS conversations × TURNS turns, AT_ONCE
at a time, with this plugin and then with the built-in compressor, in one run.

``python3 bench/messaging_load.py [--hermes 0.22.2] [--quick]`` or ``bench/run.py --only
messaging_load`` (not in the default run: ~5 min per host on 2 cores). The drive runs in a child
process of the host's venv (``--child``) with the e2e harness (tests/e2e/harness.py: a real
``hermes gateway run`` with the API server platform, §12c of the contract), the fake model
(tests/fakes/fake_llm.py) and, for the plugin, the fake Gateway with the real one's slow
``/compact`` (tests/fakes/gateway/). Each turn is ``DO read`` of READS fresh ~25 KB files, on
the host's minimum 64K window, so each conversation compacts about once by its last turn.

Per engine: turn latency p50 / p95 (one turn = one POST /v1/chat/completions, as a messaging
client waits for it), turns answered, the gateway process's CPU seconds per turn (user +
system, every thread, from the first turn to idle after the last; a third run, the plugin
without a Gateway, after the built-in's, holds issue 29's bar: at most CPU_RATIO × the
built-in's), and its RSS, open fds and threads
(harness ``process_counts``) after the first WARMUP_SHARE of the conversations finished and at
the end (idle, 1 s after the last reply). Flat = RSS growth ≤ RSS_GROWTH and fds ≤ +FD_SLACK.
The host's own process grows with every new session whatever the engine, so a further row
judges what the plugin adds: its RSS growth at most the built-in's + EXCESS_MB. The side-by-side figures of tests/e2e/measure.py (requests over the window, rewrites, cost
under a prefix cache) come from the same wire recording.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
CONVERSATIONS, TURNS, AT_ONCE, READS = 100, 3, 6, 2
QUICK = (24, 2, 6, 2)
WINDOW, THRESHOLD, RATIO = 64_000, 0.75, 0.5
WARMUP_SHARE = 0.2                  # conversation 20 of 100
RSS_GROWTH, FD_SLACK = 0.10, 5
EXCESS_MB = 8.0                     # the plugin's RSS growth beyond the built-in's in the same run
CPU_RATIO = 1.10                    # issue 29: CPU per turn at most this times the built-in's
TAG = "mlq%03dq"
TAG_RE = re.compile(r"mlq(\d{3})q")
GW_KEY = "bench-messaging-key"
ENGINES = ("plugin", "builtin")
LOCAL = "plugin-local"              # the plugin without a Gateway: issue 29's CPU bar is on it
RUN_ORDER = ("plugin", "builtin", LOCAL)    # the built-in between the plugin's two runs


# -- pure parts (unit-tested) -----------------------------------------------------------------

def percentile(values: List[float], q: float) -> float:
    """Nearest rank (the bench's one percentile, bench/_common.py)."""
    sys.path.insert(0, str(HERE))
    import _common
    return _common.pct(values, q)


def flat(warm: Dict[str, int], end: Dict[str, int], rss_growth: float = RSS_GROWTH,
         fd_slack: int = FD_SLACK) -> Dict[str, bool]:
    """RSS and fds after warm-up vs at the end: growth within the bounds."""
    return {"rss": end["rss_kb"] <= warm["rss_kb"] * (1 + rss_growth),
            "fds": end["fds"] <= warm["fds"] + fd_slack}


def engine_rows(host: str, shape: str, runs: Dict[str, Dict[str, Any]]) -> List[Dict[str, Any]]:
    """Report rows from the child's figures: latency p50 / p95 of the plugin against the
    built-in's, then RSS and fds of each engine's gateway process, then the wire figures."""
    sys.path.insert(0, str(HERE))
    from cases import row
    out: List[Dict[str, Any]] = []
    p, b = runs["plugin"], runs["builtin"]
    base = "messaging_load/%s/" % host
    for q in (50, 95):
        key = "p%d" % q
        out.append(row(base + "latency/" + key, "messaging gateway turn latency %s" % key,
                       "Hermes %s, %s: plugin" % (host, shape), "s", p[key], None, p["turns"],
                       b[key], "built-in %s" % key, "beside the built-in's (same run)", None,
                       note="answered %d/%d (built-in %d/%d); slowest turn %.1f s (built-in %.1f s)"
                       % (p["answered"], p["turns"], b["answered"], b["turns"], p["max"], b["max"]),
                       group="messaging_load", host=host))
    local = runs.get(LOCAL) or {}
    for r, label, bar in ((local, "plugin without a Gateway", True),
                          (p, "plugin with the (fake) Gateway", False)):
        if "cpu_per_turn" not in r or "cpu_per_turn" not in b:
            continue                    # a result from before this row
        out.append(row(base + ("cpu" if bar else "cpu/gateway"), "messaging gateway CPU seconds per turn",
                       "Hermes %s, %s: %s" % (host, shape, label), "s", r["cpu_per_turn"], None,
                       r["turns"], b["cpu_per_turn"], "built-in",
                       "≤ %.2f× the built-in's" % CPU_RATIO if bar else "beside the built-in's",
                       r["cpu_per_turn"] <= CPU_RATIO * b["cpu_per_turn"] if bar else None,
                       note="the gateway process's user + system CPU from its first turn to idle "
                       "after the last, every thread (the plugin's sender and writer too), over "
                       "its turns; turn latency p50 %.2f s vs %.2f s; rewrites per "
                       "conversation %.1f vs %.1f; the engines run one after the other in the "
                       "same run" % (r["p50"], b["p50"], r["rewrites"], b["rewrites"]),
                       group="messaging_load", host=host))
    for engine in ENGINES:
        r = runs[engine]
        w, e = r["warm"], r["end"]
        ok = flat(w, e)
        label = "plugin" if engine == "plugin" else "built-in"
        out.append(row(base + "rss/" + engine, "messaging gateway RSS", "Hermes %s, %s: %s, end "
                       "vs after conversation %d" % (host, shape, label, r["warm_after"]), "MB",
                       e["rss_kb"] / 1024, None, 2, w["rss_kb"] / 1024, "after warm-up",
                       "≤ +%d %%" % round(RSS_GROWTH * 100), ok["rss"],
                       note="both idle (1 s after the last reply); mid-run samples "
                       "(conversations done: MB) %s" % ", ".join(
                           "%d: %.0f" % (s["done"], s["rss_kb"] / 1024) for s in r["series"]),
                       group="messaging_load", host=host, engine=engine,
                       allowed=RSS_GROWTH * w["rss_kb"] / 1024))
        out.append(row(base + "fds/" + engine, "messaging gateway open fds", "Hermes %s, %s: %s, "
                       "end vs after conversation %d" % (host, shape, label, r["warm_after"]), "fds",
                       e["fds"], None, 2, w["fds"], "after warm-up", "≤ +%d" % FD_SLACK, ok["fds"],
                       ratio=None, note="both idle; threads %d → %d; mid-run fds %s" % (
                           w["threads"], e["threads"], ", ".join("%d: %d" % (s["done"], s["fds"])
                                                                for s in r["series"])),
                       group="messaging_load", host=host, engine=engine, allowed=FD_SLACK))
    grown = {e: (runs[e]["end"]["rss_kb"] - runs[e]["warm"]["rss_kb"]) / 1024 for e in ENGINES}
    out.append(row(base + "rss/plugin-beyond-builtin", "messaging gateway RSS growth after warm-up",
                   "Hermes %s, %s: plugin" % (host, shape), "MB", grown["plugin"], None, 2,
                   grown["builtin"], "built-in's growth", "≤ built-in's + %.0f MB" % EXCESS_MB,
                   grown["plugin"] <= grown["builtin"] + EXCESS_MB, ratio=None,
                   note="%.2f vs %.2f MB per conversation after warm-up" % (
                       grown["plugin"] / max(1, p["end"]["done"] - p["warm"]["done"]),
                       grown["builtin"] / max(1, b["end"]["done"] - b["warm"]["done"])),
                   group="messaging_load", host=host, allowed=EXCESS_MB))
    if p.get("cost") and b.get("cost"):
        out.append(row(base + "cost", "messaging gateway provider cost (cache read 0.1, write 1.25)",
                       "Hermes %s, %s: plugin" % (host, shape), "M units", p["cost"] / 1e6, None,
                       p["turns"], b["cost"] / 1e6, "built-in", "beside the built-in's (same run)",
                       None, note="cached %.0f %% vs %.0f %%; rewrites per conversation %.1f vs "
                       "%.1f; requests over the window %d vs %d; offered load per conversation, "
                       "min %.1f windows (a load test, not the cost yardstick: that is the e2e "
                       "side-by-side, >= 2 windows)" % (
                           100 * p["cached_share"], 100 * b["cached_share"], p["rewrites"],
                           b["rewrites"], p["over_window"], b["over_window"], p["offered_windows"]),
                       group="messaging_load", host=host))
    return out


# -- parent ----------------------------------------------------------------------------------

HOSTS = ("0.22.2", "0.19.0")


def rows(quick: bool, skipped: List[str], hosts: Tuple[str, ...] = HOSTS) -> List[Dict[str, Any]]:
    sys.path.insert(0, str(HERE))
    import host_hooks
    return [r for host, got in host_hooks.host_results(Path(__file__).resolve(), hosts, quick, skipped,
                                                       "messaging gateway load")
            for r in engine_rows(host, got["shape"], got["runs"])]


# -- child (the host's venv) -----------------------------------------------------------------

def say(msg: str) -> None:
    print("[messaging-load %s] %s" % (time.strftime("%H:%M:%S"), msg), file=sys.stderr, flush=True)


def drive(engine: str, tmp: Path, convs: int, turns: int, at_once: int, reads: int) -> Dict[str, Any]:
    """One engine's run in one gateway process -> its figures."""
    import harness
    import measure
    from tests.fakes.fake_llm import FakeLLM
    from tests.fakes.gateway import FakeGateway

    files = Path(tempfile.mkdtemp(prefix="ml"))
    warm_after = max(1, int(convs * WARMUP_SHARE))
    replies: List[Tuple[int, Any]] = []
    series: List[Dict[str, int]] = []
    lock = threading.Lock()
    done = [0]
    gwp = None
    try:
        with FakeLLM() as llm, FakeGateway(api_key=GW_KEY) as gw:
            gw.slow_compact()
            home, port = harness.engine_home(
                tmp, "plugin" if engine == LOCAL else engine, llm.url, window=WINDOW,
                concurrent_runs=4 * at_once,
                settings={"TENCENTDB_OFFLOAD_GATEWAY_URL": "off" if engine == LOCAL else gw.url,
                          "TENCENTDB_OFFLOAD_API_KEY": GW_KEY,
                          "TENCENTDB_OFFLOAD_THRESHOLD": str(THRESHOLD),
                          "TENCENTDB_OFFLOAD_COMPACT_RATIO": str(RATIO)})
            gwp = harness.GatewayProcess(home, port)
            gwp.start()
            cpu_at_start = harness.process_cpu_seconds(gwp.pid)
            step = max(1, convs // 10)

            def sample() -> None:                   # mid-run (requests in flight)
                c = gwp.counts()
                series.append({"done": done[0], "rss_kb": c.rss_kb, "fds": c.fds, "threads": c.threads})

            def conversation(i: int) -> None:
                tag = TAG % i
                for n in range(1, turns + 1):
                    made = harness.make_text_files(files, reads, tag=tag, start=(n - 1) * reads)
                    prompt = "DO read " + " ".join(p for p, _ in made) + "\n[%s] turn %d" % (tag, n)
                    reply = gwp.chat("mlq-" + tag, prompt)
                    with lock:
                        replies.append((i, reply))
                with lock:
                    done[0] += 1
                    if done[0] % step == 0:
                        sample()
                    if done[0] % step == 0:
                        say("%s: %d/%d conversations" % (engine, done[0], convs))

            def idle_counts() -> Dict[str, int]:      # both samples idle: nothing in flight
                time.sleep(1.0)
                c = gwp.counts()
                return {"done": done[0], "rss_kb": c.rss_kb, "fds": c.fds, "threads": c.threads}

            t0 = time.monotonic()
            with ThreadPoolExecutor(at_once) as pool:          # warm-up: the first conversations
                list(pool.map(conversation, range(warm_after)))
            warm = idle_counts()
            with ThreadPoolExecutor(at_once) as pool:
                list(pool.map(conversation, range(warm_after, convs)))
            wall = time.monotonic() - t0
            end = idle_counts()
            cpu = harness.process_cpu_seconds(gwp.pid) - cpu_at_start
            gwp.sigterm()
            exchanges = llm.exchanges
    finally:
        if gwp is not None:
            gwp.kill()
        shutil.rmtree(files, ignore_errors=True)
    expected = "done: read %d file(s)" % reads
    seconds = sorted(r.seconds for _, r in replies)
    by_conv: Dict[str, list] = {TAG % i: [] for i in range(convs)}
    for ex in exchanges:
        found = set(TAG_RE.findall(harness.request_text(ex.body)))
        if len(found) == 1:
            by_conv.setdefault(TAG % int(found.pop()), []).append(ex)
    trigger = measure.builtin_trigger(WINDOW) if engine == "builtin" else int(THRESHOLD * WINDOW)
    wire = measure.analyse(engine, by_conv, window=WINDOW, trigger=trigger, turns=len(replies),
                           answered=0)
    return {"turns": len(replies), "seconds_wall": wall,
            "answered": sum(1 for _, r in replies if r.status == 200 and r.text.strip() == expected),
            "p50": percentile(seconds, 50), "p95": percentile(seconds, 95), "max": seconds[-1],
            "warm_after": warm_after, "warm": warm,
            "end": end, "series": series, "cpu_per_turn": cpu / max(1, len(replies)),
            "cost": wire.cost, "cached_share": wire.cached_share,
            "rewrites": wire.rewrites_per_conversation, "over_window": wire.over_window,
            "offered_windows": wire.min_offered / WINDOW}


def child(quick: bool) -> int:
    sys.path.insert(0, str(ROOT / "tests" / "e2e"))
    sys.path.append(str(ROOT))
    import harness
    problem = harness.api_server_problem() or harness.plugin_problem()
    if harness.hermes_version().startswith("0.17"):
        problem = "Hermes 0.17's messaging gateway is not a supported host (docs/hosts.md)"
    if problem:
        print("RESULT " + json.dumps({"error": problem}))
        return 0
    convs, turns, at_once, reads = QUICK if quick else (CONVERSATIONS, TURNS, AT_ONCE, READS)
    shape = "%d conversations × %d turns, %d at once" % (convs, turns, at_once)
    tmp = Path(tempfile.mkdtemp(prefix="tdo-messaging-load-"))
    runs: Dict[str, Any] = {}
    try:
        for engine in RUN_ORDER:
            say("%s: %s (%d reads of ~25 KB a turn)" % (engine, shape, reads))
            runs[engine] = drive(engine, tmp / engine, convs, turns, at_once, reads)
            r = runs[engine]
            say("%s: p50 %.1f s p95 %.1f s, answered %d/%d, RSS %.0f -> %.0f MB, fds %d -> %d, %.0f s"
                % (engine, r["p50"], r["p95"], r["answered"], r["turns"], r["warm"]["rss_kb"] / 1024,
                   r["end"]["rss_kb"] / 1024, r["warm"]["fds"], r["end"]["fds"], r["seconds_wall"]))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("RESULT " + json.dumps({"shape": shape, "hermes": harness.hermes_version(), "runs": runs}))
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    sys.path.insert(0, str(HERE))
    import host_hooks
    return host_hooks.host_main(argv, __doc__, HOSTS, "%d conversations × %d turns" % QUICK[:2], child, rows)


if __name__ == "__main__":
    sys.exit(main())
