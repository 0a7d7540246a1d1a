#!/usr/bin/env python3
"""The plugin's hooks timed as the host calls them: through the real plugin manager of each
Hermes host, beside a no-op plugin's hooks (the host's own floor) in the same run.

For each host (0.19.0, 0.22.2) the parent makes two HERMES_HOMEs like a user's (harness
``make_home``): one with this plugin installed and enabled (the fake Gateway up), one with a
generated plugin ``tdo-noop`` that registers the same hooks doing nothing. Each arm runs in a
child process of that host's venv (``--child``), which discovers plugins with Hermes' own
manager, checks that the arm's callbacks are the ones registered, and times the host's own
dispatch function (``hermes_cli.lifecycle.invoke_hook`` on 0.22, ``hermes_cli.plugins.invoke_hook``
before) with the kwargs the host passes. Arms alternate in rounds (no-op, plugin, no-op, …) so
both see the same machine load. Between calls the child sleeps ``GAP_MS`` untimed (a tool call
is never right after the previous one); the plugin's writer and ingest threads run meanwhile.

Row: plugin p50 / p99, floor = the no-op plugin's p99, target p99 ≤ floor + 1 ms.
A host whose venv is missing is built with tests/run.py's ``ensure_venv``; when that fails the
host is skipped with the reason.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
HOSTS = ("0.19.0", "0.22.2")
NOOP = "tdo-noop"
HOOKS = ("post_tool_call", "pre_llm_call")       # what the plugin registers (plugin.yaml)
RESULT_SIZES = (("1 KB", 1024), ("100 KB", 100 * 1024))
HISTORY_SIZES = (50, 500)
GAP_MS = 5.0
SLACK_US = 1000.0                                 # target: p99 ≤ floor + 1 ms
NOOP_INIT = '''"""Registers the hooks tencentdb-offload registers, doing nothing (the bench floor)."""


def _noop(**kwargs):
    return None


def register(ctx):
    for name in %r:
        ctx.register_hook(name, _noop)
''' % (HOOKS,)
NOOP_YAML = "name: %s\nkind: standalone\nversion: 0.0.1\ndescription: bench floor\n" \
            "provides_hooks:\n%s" % (NOOP, "".join("  - %s\n" % h for h in HOOKS))


# -- pure parts (unit-tested) -----------------------------------------------------------------

def stats(samples_ns: List[int]) -> Dict[str, float]:
    """p50 / p99 / max in µs (nearest rank, the bench's one percentile)."""
    sys.path.insert(0, str(HERE))
    import _common
    us = [v / 1000.0 for v in samples_ns]
    return {"p50": _common.pct(us, 50), "p99": _common.pct(us, 99), "max": max(us) if us else float("nan"),
            "n": len(us)}


def judge(plugin: Dict[str, float], floor: Dict[str, float], slack_us: float = SLACK_US) -> bool:
    """The issue's bar: the plugin's p99 at most the no-op plugin's p99 + ``slack_us``."""
    return plugin["p99"] <= floor["p99"] + slack_us


def host_row(host: str, case_id: str, case: str, plugin: Dict[str, float],
             floor: Dict[str, float], extra_note: str = "") -> Dict[str, Any]:
    sys.path.insert(0, str(HERE))
    from cases import row
    hook = case_id.split("/")[0]
    met = judge(plugin, floor)
    note = ("no-op plugin p50 / p99 / max %.1f / %.1f / %.1f µs; plugin max %.1f µs; "
            "%d calls per arm%s" % (floor["p50"], floor["p99"], floor["max"], plugin["max"],
                                    plugin["n"], "; " + extra_note if extra_note else ""))
    return row("host_hooks/%s/%s" % (host, case_id), "%s via Hermes %s plugin manager" % (hook, host),
               case, "µs", plugin["p50"], plugin["p99"], int(plugin["n"]), floor["p99"],
               "no-op plugin p99", "p99 ≤ floor + 1 ms", met,
               ratio=plugin["p99"] / floor["p99"] if floor["p99"] else None, note=note,
               group="host_hooks", host=host, floor_p50=floor["p50"], floor_max=floor["max"],
               max=plugin["max"])


# -- parent ----------------------------------------------------------------------------------

def host_results(script: Path, hosts: Tuple[str, ...], quick: bool, skipped: List[str],
                 what: str) -> List[Tuple[str, Dict[str, Any]]]:
    """``script --child [--quick]`` run in each host's venv -> (host, its RESULT payload); a
    host whose venv is missing or whose drive failed goes to ``skipped``, saying why."""
    out: List[Tuple[str, Dict[str, Any]]] = []
    for host in hosts:
        py, why = venv_python(host)
        if py is None:
            skipped.append("%s on Hermes %s: %s" % (what, host, why))
            continue
        cmd = [str(py), str(script), "--child"] + (["--quick"] if quick else [])
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, timeout=3 * 3600,
                              stdin=subprocess.DEVNULL)   # progress goes to stderr, as it happens
        line = next((l for l in proc.stdout.splitlines() if l.startswith("RESULT ")), None)
        got = json.loads(line[len("RESULT "):]) if line else {
            "error": "the drive failed (rc %d; its log is above): %s" % (proc.returncode, proc.stdout[-800:])}
        if "error" in got:
            skipped.append("%s on Hermes %s: %s" % (what, host, got["error"]))
            continue
        out.append((host, got))
    return out


def host_main(argv: Optional[List[str]], doc: str, hosts: Tuple[str, ...], quick_help: str,
              child: Callable[[bool], int], rows: Callable[..., List[Dict[str, Any]]]) -> int:
    """The command line of a bench script with a drive per host: ``--child`` runs the drive,
    otherwise each host's rows are printed."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("--hermes", action="append", help="host version(s) (default %s)" % ", ".join(hosts))
    ap.add_argument("--quick", action="store_true", help=quick_help)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        return child(args.quick)
    skipped: List[str] = []
    for r in rows(args.quick, skipped, tuple(args.hermes or hosts)):
        print("%-40s %-62s %8.2f %s (%s %.2f) met %s\n    %s" % (
            r["id"], r["what"], r["median"], r["unit"], r["floor_what"], r["floor"], r["met"], r["note"]))
    for s in skipped:
        print("skipped:", s)
    return 0


def venv_python(host: str) -> Tuple[Optional[Path], str]:
    """The host's venv python (built once with tests/run.py's recipe when missing), or
    (None, why not)."""
    raw = os.environ.get("TDO_VENV_DIR")
    root = Path(raw) if raw else Path.home() / ".cache" / "tencentdb-offload" / "venvs"
    py = root / ("hermes-" + host) / "bin" / "python"
    if py.exists() and (py.parent / "hermes").exists():
        return py, ""
    try:
        import importlib.util           # tests/run.py, under a name bench/run.py cannot shadow
        spec = importlib.util.spec_from_file_location("tdo_tests_run", ROOT / "tests" / "run.py")
        test_run = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(test_run)
        return test_run.ensure_venv("hermes-" + host, test_run.hermes_requirements(host)), ""
    except SystemExit as exc:           # pip failed (no registry access?)
        return None, "no Hermes %s venv and it could not be built: %s" % (host, exc)
    except Exception as exc:
        return None, "no Hermes %s venv and it could not be built: %s: %s" % (
            host, type(exc).__name__, exc)


def make_homes(tmp: Path, gateway_url: str) -> Dict[str, Path]:
    sys.path.insert(0, str(ROOT / "tests" / "e2e"))
    import harness
    llm = "http://127.0.0.1:9/v1"           # never called: hooks only
    homes = {"plugin": harness.make_home(tmp / "plugin", llm, env={
        "TENCENTDB_OFFLOAD_GATEWAY_URL": gateway_url})}
    noop = harness.make_home(tmp / "noop", llm, engine="compressor", enabled_plugins=(NOOP,))
    write_noop_plugin(noop)
    homes["noop"] = noop
    return homes


def write_noop_plugin(home: Path) -> None:
    """The no-op plugin (the bench floor) in ``home``'s plugins folder; enable it by name."""
    (home / "plugins" / NOOP).mkdir(parents=True)
    (home / "plugins" / NOOP / "__init__.py").write_text(NOOP_INIT)
    (home / "plugins" / NOOP / "plugin.yaml").write_text(NOOP_YAML)


def run_child(py: Path, arm: str, home: Path, reps: int) -> Dict[str, Any]:
    sys.path.insert(0, str(ROOT / "tests" / "e2e"))
    import harness
    env = harness._child_env(home, None)
    proc = subprocess.run([str(py), str(Path(__file__).resolve()), "--child", arm, str(reps)],
                          env=env, cwd=str(home.parent), capture_output=True, text=True,
                          timeout=900, stdin=subprocess.DEVNULL)
    line = next((l for l in proc.stdout.splitlines() if l.startswith("RESULT ")), None)
    if proc.returncode != 0 or line is None:
        raise RuntimeError("%s child failed (rc %d): %s" % (arm, proc.returncode,
                                                           (proc.stderr or proc.stdout)[-800:]))
    return json.loads(line[len("RESULT "):])


def rows(gateway_url: str, quick: bool, skipped: List[str],
         hosts: Tuple[str, ...] = HOSTS) -> List[Dict[str, Any]]:
    out: List[Dict[str, Any]] = []
    rounds, reps = (2, 50) if quick else (6, 50)     # short rounds: both arms see the same load
    for host in hosts:
        py, why = venv_python(host)
        if py is None:
            skipped.append("hooks through the Hermes %s plugin manager: %s" % (host, why))
            continue
        tmp = Path(tempfile.mkdtemp(prefix="tdo-host-hooks-"))
        try:
            homes = make_homes(tmp, gateway_url)
            samples: Dict[str, Dict[str, List[int]]] = {"noop": {}, "plugin": {}}
            info: Dict[str, Any] = {}
            for _ in range(rounds):
                for arm in ("noop", "plugin"):
                    got = run_child(py, arm, homes[arm], reps)
                    for case, vals in got["samples"].items():
                        samples[arm].setdefault(case, []).extend(vals)
                    info[arm] = got
        except Exception as exc:
            skipped.append("hooks through the Hermes %s plugin manager: %s" % (host, exc))
            continue
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        extra = "plugin archived %d of its %d results (last child); dispatch %s; arms alternating " \
                "over %d round(s), %.0f ms untimed gap between calls" % (
                    info["plugin"]["archived"], info["plugin"]["posted"],
                    info["plugin"]["dispatch"], rounds, GAP_MS)
        for case_id, label in _cases():
            out.append(host_row(host, case_id, label, stats(samples["plugin"][case_id]),
                                stats(samples["noop"][case_id]), extra))
    return out


def _cases() -> List[Tuple[str, str]]:
    return ([("post_tool_call/" + label, "result %s, Gateway up" % label) for label, _ in RESULT_SIZES]
            + [("pre_llm_call/%d" % n, "{:,} messages, Gateway up".format(n)) for n in HISTORY_SIZES])


# -- child (runs inside the host's venv) ------------------------------------------------------

def child(arm: str, reps: int) -> int:
    import importlib.util
    spec = importlib.util.spec_from_file_location("tdo_bench_common", HERE / "_common.py")
    C = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(C)
    import hermes_cli.plugins as hp
    try:
        from hermes_cli.lifecycle import invoke_hook      # 0.22: what run_agent calls
        dispatch = "hermes_cli.lifecycle.invoke_hook"
    except ImportError:
        invoke_hook = hp.invoke_hook
        dispatch = "hermes_cli.plugins.invoke_hook"
    hp.discover_plugins()
    pm = hp.get_plugin_manager()
    for hook in HOOKS:       # exactly the arm's own callback, nothing else
        cbs = pm._hooks.get(hook, [])
        names = ["%s.%s" % (getattr(cb, "__module__", ""), getattr(cb, "__qualname__", "")) for cb in cbs]
        wanted = "_noop" if arm == "noop" else "HookHandlers.%s" % hook
        if len(cbs) != 1 or not names[0].endswith(wanted):
            raise SystemExit("%s: %s callbacks registered: %r" % (arm, hook, names))
    sid = "bench-host-hooks"
    n = [0]
    samples: Dict[str, List[int]] = {}

    def time_case(key: str, call) -> None:
        out = samples.setdefault(key, [])
        for i in range(reps + 5):
            t0 = time.perf_counter_ns()
            call()
            t = time.perf_counter_ns() - t0
            if i >= 5:                         # warm-up
                out.append(t)
            time.sleep(GAP_MS / 1000.0)

    for label, size in RESULT_SIZES:
        result = _common.slice_text(size, size)

        def post() -> None:
            n[0] += 1
            invoke_hook("post_tool_call", tool_name="read_file", args={"path": "/src/m%d.py" % n[0]},
                        result=result, task_id="t", session_id=sid, tool_call_id="c%d-%d" % (os.getpid(), n[0]),
                        turn_id="turn-%d" % (n[0] // 10), api_request_id="r%d" % n[0],
                        duration_ms=12, status="ok", error_type=None, error_message=None,
                        middleware_trace=[])
        time_case("post_tool_call/" + label, post)
    for size in HISTORY_SIZES:
        hist = _common.conversation(size, result_chars=2000, prefix="h%d" % size)

        def pre() -> None:
            n[0] += 1
            invoke_hook("pre_llm_call", session_id=sid, task_id="t", turn_id="turn-%d" % n[0],
                        user_message="please fix the failing test number %d and explain what "
                        "caused it" % n[0], conversation_history=list(hist), is_first_turn=False,
                        model="fake-model", platform="cli", parent_session_id="", sender_id="")
        time_case("pre_llm_call/%d" % size, pre)
    posted = (reps + 5) * len(RESULT_SIZES)
    archived = _archived(Path(os.environ["HERMES_HOME"]), posted) if arm == "plugin" else 0
    print("RESULT " + json.dumps({"samples": samples, "dispatch": dispatch, "posted": posted,
                                  "archived": archived}))
    sys.stdout.flush()
    os._exit(0)          # the plugin's daemon threads and the host's pools need no teardown here


def _archived(home: Path, expected: int, wait: float = 30.0) -> int:
    """Tool results in the plugin's archive (the positive control that its hook worked)."""
    import sqlite3
    db = home / "tencentdb-offload" / "store.db"
    deadline = time.monotonic() + wait
    count = 0
    while time.monotonic() < deadline:
        if db.exists():
            conn = sqlite3.connect("file:%s?mode=ro" % db, uri=True, timeout=10)
            try:
                count = conn.execute("SELECT count(DISTINCT tool_call_id) FROM archive WHERE "
                                     "kind='tool_result' AND tool_call_id LIKE ?",
                                     ("c%d-%%" % os.getpid(),)).fetchone()[0]
            except sqlite3.Error:
                count = 0
            finally:
                conn.close()
            if count >= expected:
                return count
        time.sleep(0.5)
    return count


if __name__ == "__main__":
    if len(sys.argv) >= 4 and sys.argv[1] == "--child":
        sys.exit(child(sys.argv[2], int(sys.argv[3])))
    skipped: List[str] = []
    sys.path.insert(0, str(HERE))
    from _gateway import GatewayProc
    gw = GatewayProc()
    try:
        got = rows(gw.url, "--quick" in sys.argv, skipped)
    finally:
        gw.stop()
    for r in got:
        print("%-55s p50 %8.1f  p99 %8.1f  floor %8.1f  met %s" % (
            r["id"], r["median"], r["p99"], r["floor"], r["met"]))
    for s in skipped:
        print("skipped:", s)
