#!/usr/bin/env python3
"""The per-turn CLI (one ``hermes chat -q`` process per turn, ``--resume``), arm by arm in one run:
the built-in compressor, the built-in with a no-op plugin enabled (``noop``: what the host
charges any enabled plugin, e.g. 0.22's scan of every plugin manifest at each start), the
plugin without a Gateway, the plugin with a Gateway that accepts connections and never answers
(``hang``), and with one whose every third request fails (503).

``python3 bench/per_turn_cli.py [--hermes 0.19.0] [--quick]`` or ``bench/run.py --only
per_turn_cli`` (not in the default run: ~3 min per host on 2 cores). The drive runs in a child
process of the host's venv (``--child``) with the e2e harness, the fake model and the fake
Gateway (tests/fakes/). The arms take turns: turn 1 of every arm, then turn 2 of every arm, …,
one process at a time, so each turn runs on the same quiet machine and its CPU time is the
finished child's own (``RUSAGE_CHILDREN`` before and after; the fake model and Gateway run in
this process and are not counted). Each turn reads READS fresh ~25 KB files on the host's
minimum 64K window (the session offers > 2 windows).

Rows per host: CPU seconds per turn and turn latency (median) of the plugin against the
built-in's (issue 29's bar: ≤ 1.10×) and, as the floor any plugin pays, the no-op arm's against
the built-in's; the session's total time with the hung and the flaky Gateway against the
no-Gateway plugin's (issue 27 item 13's bar: ≤ 1.10×).
"""

from __future__ import annotations

import json
import resource
import shutil
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
TURNS, READS, WINDOW = 9, 3, 64_000
QUICK_TURNS = 4
BAR = 1.10
GW_KEY = "bench-per-turn-key"
HOSTS = ("0.19.0", "0.22.2")
ARMS = ("builtin", "noop", "plugin", "hung", "flaky")


def median(values: List[float]) -> float:
    s = sorted(values)
    if not s:
        return 0.0
    mid = len(s) // 2
    return s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2


# -- parent ----------------------------------------------------------------------------------

def host_rows(host: str, runs: Dict[str, Dict[str, Any]]) -> List[Dict[str, Any]]:
    """Report rows: the plugin's CPU and latency per turn against the built-in's, then the hung
    and flaky sessions' total time against the no-Gateway one's."""
    sys.path.insert(0, str(HERE))
    from cases import row
    out: List[Dict[str, Any]] = []
    p, b = runs["plugin"], runs["builtin"]
    base = "per_turn_cli/%s/" % host
    shape = "%d turns of %d reads of ~25 KB, one process per turn" % (len(p["seconds"]), READS)
    # a turn that failed (e.g. a request over the window) ends early: only turns every arm
    # compared answered are compared
    noop = runs.get("noop")
    both = [i for i in range(len(p["seconds"])) if all(
        r.get("ok", [True] * (i + 1))[i] for r in (p, b, noop) if r)]
    for key, what, unit in (("cpu", "CPU seconds per turn (the Hermes process)", "s"),
                            ("seconds", "turn latency (the Hermes process)", "s")):
        mine, theirs = (median([r[key][i] for i in both]) for r in (p, b))
        floor = "; medians over the %d turns all answered" % len(both)
        if noop and noop[key]:
            any_plugin = median([noop[key][i] for i in both])
            floor = ("; built-in with a no-op plugin enabled %.2f %s (%.2fx: the host's charge for "
                     "any plugin)%s" % (any_plugin, unit, any_plugin / max(1e-9, theirs), floor))
        out.append(row(base + key, "per-turn CLI " + what + ", median",
                       "Hermes %s, %s: plugin, no Gateway" % (host, shape), unit, mine, max(p[key]),
                       len(p[key]), theirs, "built-in (same run, turns interleaved)",
                       "≤ %.2fx the built-in's" % BAR, mine <= BAR * theirs,
                       note="answered %d/%d (built-in %d/%d)%s" % (p["answered"], len(p["seconds"]),
                                                                  b["answered"], len(b["seconds"]), floor),
                       group="per_turn_cli", host=host))
    for arm, what in (("hung", "a Gateway that never answers"), ("flaky", "every third Gateway request fails")):
        r = runs[arm]
        total, plain = sum(r["seconds"]), sum(p["seconds"])
        out.append(row(base + "gateway/" + arm, "per-turn CLI session time with " + what,
                       "Hermes %s, %s: plugin" % (host, shape), "s", total, None, len(r["seconds"]),
                       plain, "the same session without a Gateway (same run)",
                       "≤ %.2fx without a Gateway" % BAR, total <= BAR * plain,
                       note="turn median %.1f s vs %.1f s; answered %d/%d; CPU per turn %.2f s" % (
                           median(r["seconds"]), median(p["seconds"]), r["answered"],
                           len(r["seconds"]), median(r["cpu"])),
                       group="per_turn_cli", host=host))
    return out


def rows(quick: bool, skipped: List[str], hosts: Tuple[str, ...] = HOSTS) -> List[Dict[str, Any]]:
    sys.path.insert(0, str(HERE))
    import host_hooks
    return [r for host, got in host_hooks.host_results(Path(__file__).resolve(), hosts, quick, skipped,
                                                       "per-turn CLI")
            for r in host_rows(host, got["runs"])]


# -- child (the host's venv) -----------------------------------------------------------------

def say(msg: str) -> None:
    print("[per-turn-cli %s] %s" % (time.strftime("%H:%M:%S"), msg), file=sys.stderr, flush=True)


def child_cpu() -> float:
    use = resource.getrusage(resource.RUSAGE_CHILDREN)
    return use.ru_utime + use.ru_stime


def open_arm(stack: ExitStack, arm: str, tmp: Path) -> Any:
    """One arm's conversation: its own fake model, home and (for the Gateway arms) fake Gateway."""
    import harness
    from tests.fakes.fake_llm import FakeLLM
    from tests.fakes.gateway import FakeGateway

    llm = stack.enter_context(FakeLLM())
    # a user's turn: the host's toolchain probe on, as Hermes ships it
    if arm == "builtin":
        home = harness.make_home(tmp, llm.url, context_length=WINDOW, engine="compressor",
                                 enabled_plugins=(), environment_probe=True)
    elif arm == "noop":
        import host_hooks
        home = harness.make_home(tmp, llm.url, context_length=WINDOW, engine="compressor",
                                 enabled_plugins=(host_hooks.NOOP,), environment_probe=True)
        host_hooks.write_noop_plugin(home)
    else:
        url = "off"
        if arm in ("hung", "flaky"):
            gw = stack.enter_context(FakeGateway(api_key=GW_KEY))
            gw.set_fault("hang" if arm == "hung" else "5xx", every=1 if arm == "hung" else 3,
                         hang_seconds=3600.0)
            url = gw.url
        home = harness.make_home(tmp, llm.url, context_length=WINDOW, env={
            "TENCENTDB_OFFLOAD_GATEWAY_URL": url, "TENCENTDB_OFFLOAD_API_KEY": GW_KEY},
            environment_probe=True)
    return harness.Conversation(llm, home, timeout=300), harness.FileSupply(tmp / "files", tag="pt" + arm[:2])


def child(quick: bool) -> int:
    sys.path.insert(0, str(ROOT / "tests" / "e2e"))
    sys.path.append(str(ROOT))
    import harness
    problem = harness.plugin_problem()
    if problem:
        print("RESULT " + json.dumps({"error": problem}))
        return 0
    turns = QUICK_TURNS if quick else TURNS
    tmp = Path(tempfile.mkdtemp(prefix="tdo-per-turn-"))
    runs: Dict[str, Dict[str, Any]] = {a: {"seconds": [], "cpu": [], "ok": [], "answered": 0} for a in ARMS}
    expected = "done: read %d file(s)" % READS
    try:
        with ExitStack() as stack:
            arms = {a: open_arm(stack, a, tmp / a) for a in ARMS}
            for n in range(1, turns + 1):
                for arm, (conv, supply) in arms.items():
                    before = child_cpu()
                    turn = conv.say("DO read " + " ".join(p for p, _ in supply.take(READS)),
                                    expect_ok=False)
                    r = runs[arm]
                    r["cpu"].append(child_cpu() - before)
                    r["seconds"].append(turn.result.seconds)
                    r["ok"].append(expected in turn.result.stdout)
                    r["answered"] += r["ok"][-1]
                say("turn %d: %s" % (n, ", ".join("%s %.1f s" % (a, runs[a]["seconds"][-1]) for a in ARMS)))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("RESULT " + json.dumps({"hermes": harness.hermes_version(), "runs": runs}))
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    sys.path.insert(0, str(HERE))
    import host_hooks
    return host_hooks.host_main(argv, __doc__, HOSTS, "%d turns" % QUICK_TURNS, child, rows)


if __name__ == "__main__":
    sys.exit(main())
