#!/usr/bin/env python3
"""How often ``hermes chat -q … --resume`` dies at exit, with this plugin and without it.

``python3 bench/host_exit_crash.py [--turns 30] [--hermes 0.22.2]`` (re-runs itself with the
Hermes venv's python that ``tests/run.py`` built under ``$TDO_VENV_DIR``, default
``~/.cache/tencentdb-offload/venvs``). Two conversations run side by side against one fake
OpenAI server (``tests/fakes/fake_llm.py``), so both see the same machine load: one with the
plugin installed (local mode), one with no plugin at all (the built-in compressor). Every turn
is a fresh process resuming the previous session; odd turns run one small ``read_file``
(the plugin archives it), even turns run no tool. Children run with ``PYTHONFAULTHANDLER=1``.

Per arm it reports turns, clean exits, exit crashes (killed by a signal after the answer and
the ``session_id:`` line: ``tests/e2e/exit_crash.py``), other failures, crash rates per turn
kind, whether any crash traceback shows a plugin frame, the Python frames the crashes died in,
and (plugin arm) whether every tool result was in the plugin's archive after each crash.
Writes ``bench/results/host-exit-crash.{json,md}``. Not part of ``bench/run.py``: it needs a
Hermes venv and takes minutes (a turn is a 5–20 s process).
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Dict, List

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
FRAME_WORDS = 6          # leading frames of a crash's current thread that name its signature


def venv_python(version: str) -> Path:
    raw = os.environ.get("TDO_VENV_DIR")
    root = Path(raw) if raw else Path.home() / ".cache" / "tencentdb-offload" / "venvs"
    return root / ("hermes-" + version) / "bin" / "python"


def say(msg: str) -> None:
    print("[host-exit-crash %s] %s" % (time.strftime("%H:%M:%S"), msg), flush=True)


def signature(trace: str) -> str:
    """The first Python frames of the crashing thread's dump (function@file), or the dump's
    first line when it has none."""
    lines = trace.splitlines()
    start = next((i for i, l in enumerate(lines) if l.startswith(("Current thread", "Thread 0x"))), None)
    frames: List[str] = []
    for line in lines[(start or 0) + 1:]:
        line = line.strip()
        if not line.startswith("File "):
            if frames or not line:
                break
            frames.append(line)
            break
        path, _, func = line.partition(" in ")
        frames.append("%s@%s" % (func, Path(path.split('"')[1]).name))
        if len(frames) >= FRAME_WORDS:
            break
    where = " < ".join(frames) or (lines[0] if lines else "(no faulthandler output)")
    if lines and not any(l.startswith("Current thread") for l in lines):
        # faulthandler names the crashing thread "Current thread" when it runs Python
        where = ("crashing thread runs no Python; thread %s: %s" % (lines[start].split()[1], where)
                 if start is not None else "crashing thread runs no Python; no Python thread left: "
                 + lines[0])
    return where


def scrub(text: str, tmp: Path) -> str:
    """This machine's paths out of a traceback (results are committed)."""
    for path, name in ((str(tmp), "<tmp>"), (sys.prefix, "<venv>"), (sys.base_prefix, "<python>"),
                       (str(Path.home()), "~")):
        text = text.replace(path, name)
    return text


def archived_calls(home: Path) -> int:
    db = home / "tencentdb-offload" / "store.db"
    if not db.exists():
        return 0
    conn = sqlite3.connect("file:%s?mode=ro" % db, uri=True, timeout=10)
    try:
        return conn.execute("SELECT count(DISTINCT tool_call_id) FROM archive "
                            "WHERE kind='tool_result'").fetchone()[0]
    finally:
        conn.close()


def run_arm(name: str, home: Path, files: List[str], turns: int, out: Dict[str, Any]) -> None:
    import harness
    from tests.e2e.exit_crash import evidence

    session = None
    rows = out["turns"]
    tools_done = 0
    for n in range(1, turns + 1):
        tool = n % 2 == 1
        prompt = ("DO read " + files[n]) if tool else "hello %d" % n
        res = harness.run_chat(home, prompt, resume=session, timeout=300)
        crash = evidence(res.returncode, res.stdout, res.stderr)
        verdict = ("ok" if res.returncode == 0 and res.session_id else
                   "exit_crash" if crash else "failed")
        row = {"turn": n, "tool": tool, "rc": res.returncode, "verdict": verdict,
               "seconds": round(res.seconds, 1)}
        if tool and verdict != "failed":
            tools_done += 1
        if crash:
            trace = scrub(crash["faulthandler"], home.parent.parent)
            row.update(signal=crash["signal"], plugin_frames=[scrub(f, home.parent.parent)
                                                             for f in crash["plugin_frames"]],
                       signature=signature(trace), faulthandler=trace[-4000:])
            if name == "plugin":
                row["archived_all_tool_results"] = archived_calls(home) >= tools_done
        if verdict == "failed":
            row["stderr_tail"] = scrub(res.stderr, home.parent.parent).splitlines()[-15:]
        rows.append(row)
        if res.session_id:
            session = res.session_id
        if verdict != "ok":
            say("%s turn %d: %s rc=%d %s" % (name, n, verdict, res.returncode,
                                           row.get("signature", "")))
    out["archived_calls"] = archived_calls(home) if name == "plugin" else None
    out["tool_turns_done"] = tools_done


def summarize(rows: List[Dict[str, Any]]) -> Dict[str, Any]:
    def rate(sub: List[Dict[str, Any]]) -> Dict[str, Any]:
        crashes = sum(1 for r in sub if r["verdict"] == "exit_crash")
        return {"turns": len(sub), "exit_crashes": crashes,
                "rate_pct": round(100.0 * crashes / len(sub), 1) if sub else 0.0}
    resumed = [r for r in rows if r["turn"] > 1]
    sigs = collections.Counter(r["signature"] for r in rows if r.get("signature"))
    return {"all": rate(rows), "resumed": rate(resumed),
            "tool_turns": rate([r for r in rows if r["tool"]]),
            "no_tool_turns": rate([r for r in rows if not r["tool"]]),
            "ok": sum(1 for r in rows if r["verdict"] == "ok"),
            "failed": sum(1 for r in rows if r["verdict"] == "failed"),
            "plugin_frames": sorted({f for r in rows for f in r.get("plugin_frames", [])}),
            "signatures": dict(sigs.most_common()),
            "archive_complete_after_crashes": all(r.get("archived_all_tool_results", True)
                                                  for r in rows),
            "median_turn_s": sorted(r["seconds"] for r in rows)[len(rows) // 2] if rows else 0}


def markdown(res: Dict[str, Any]) -> str:
    a, b = res["arms"]["plugin"]["summary"], res["arms"]["no_plugin"]["summary"]
    out = ["# Host exit crashes: `hermes chat -q … --resume`, %s" % res["hermes"], "",
           "%s, %d turns per arm, load %s → %s, %.0f s. Children run with PYTHONFAULTHANDLER=1."
           % (res["started"], res["turns"], res["load_start"], res["load_end"], res["seconds"]), "",
           "| | with the plugin | without a plugin |", "|---|---|---|"]
    for key, label in (("all", "exit crashes, all turns"), ("resumed", "… resumed turns"),
                       ("tool_turns", "… turns with a tool call"),
                       ("no_tool_turns", "… turns without a tool call")):
        out.append("| %s | %d / %d (%.1f %%) | %d / %d (%.1f %%) |" % (
            label, a[key]["exit_crashes"], a[key]["turns"], a[key]["rate_pct"],
            b[key]["exit_crashes"], b[key]["turns"], b[key]["rate_pct"]))
    out += ["| clean exits | %d | %d |" % (a["ok"], b["ok"]),
            "| other failures | %d | %d |" % (a["failed"], b["failed"]),
            "| plugin frames in crash tracebacks | %s | %s |" % (
                ", ".join(a["plugin_frames"]) or "none", ", ".join(b["plugin_frames"]) or "none"),
            "| tool results archived after every crash | %s | n/a |" % (
                "yes" if a["archive_complete_after_crashes"] else "NO"),
            "| median turn | %.1f s | %.1f s |" % (a["median_turn_s"], b["median_turn_s"]), "",
            "Where the crashing thread was (faulthandler, first frames):", ""]
    for arm in ("plugin", "no_plugin"):
        for sig, count in res["arms"][arm]["summary"]["signatures"].items():
            out.append("- %s ×%d: `%s`" % (arm, count, sig))
    return "\n".join(out) + "\n"


def main(argv: List[str] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--turns", type=int, default=30, help="turns per arm (default 30)")
    ap.add_argument("--hermes", default="0.22.2", help="Hermes venv to use (default 0.22.2)")
    ap.add_argument("--out", default=str(HERE / "results"), help="results directory")
    args = ap.parse_args(argv)
    py = venv_python(args.hermes)
    if Path(sys.executable).parent != py.parent:
        if not py.exists():
            sys.exit("no Hermes %s venv at %s: run python3 tests/run.py --hermes %s first"
                     % (args.hermes, py, args.hermes))
        return subprocess.call([str(py), __file__] + (argv if argv is not None else sys.argv[1:]))
    sys.path.insert(0, str(ROOT / "tests" / "e2e"))
    import harness
    from tests.fakes.fake_llm import FakeLLM

    import tempfile
    tmp = Path(tempfile.mkdtemp(prefix="tdo-exit-crash-"))
    files = [p for p, _ in harness.make_text_files(tmp / "files", args.turns + 1, lines=20,
                                                   tag="crash")]
    started = time.time()
    res: Dict[str, Any] = {"hermes": harness.hermes_version(), "turns": args.turns,
                           "started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                           "load_start": _load(), "arms": {}}
    with FakeLLM() as llm:
        homes = {"plugin": harness.make_home(tmp / "plugin", llm.url,
                                             env={"TENCENTDB_OFFLOAD_GATEWAY_URL": "off"}),
                 "no_plugin": harness.make_home(tmp / "no_plugin", llm.url, engine="compressor",
                                                enabled_plugins=())}
        threads = []
        for name, home in homes.items():
            res["arms"][name] = {"turns": []}
            t = threading.Thread(target=run_arm, args=(name, home, files, args.turns,
                                                       res["arms"][name]), name=name)
            t.start()
            threads.append(t)
        say("%d turns per arm, both arms side by side, in %s" % (args.turns, tmp))
        for t in threads:
            t.join()
    for arm in res["arms"].values():
        arm["summary"] = summarize(arm["turns"])
    res["seconds"] = time.time() - started
    res["load_end"] = _load()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "host-exit-crash.json").write_text(json.dumps(res, indent=1) + "\n")
    (out / "host-exit-crash.md").write_text(markdown(res))
    print(markdown(res))
    say("wrote %s/host-exit-crash.{json,md}" % out)
    return 0


def _load() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


if __name__ == "__main__":
    sys.exit(main())
