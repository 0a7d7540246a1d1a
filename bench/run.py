#!/usr/bin/env python3
"""The one benchmark command: ``python3 bench/run.py`` (about 3 minutes on 2 cores).

``--quick`` runs smaller sizes and fewer repetitions (about 30 s). Writes
``bench/results/latest.json``, ``latest.md`` (the table) and ``latest.svg`` (the chart) —
``quick.*`` with ``--quick`` and ``partial.*`` with ``--only``, so the figures in docs/benchmarks.md
stay those of the last full run. ``--slow`` adds the slow cases (``messaging_load``: one Hermes
messaging gateway, 100 conversations × 3 turns, plugin and built-in; bench/messaging_load.py)
and ``per_turn_cli`` (the per-turn CLI with the built-in, the plugin and a hung or flaky
Gateway, turns interleaved; bench/per_turn_cli.py) to a full run; ``--only NAME`` runs one alone. ``host_hooks`` and ``messaging_load``
run in the Hermes venvs that ``tests/run.py`` builds (built here when missing; a host whose
venv cannot be built is skipped with the reason).
The fake Gateway runs in a child process (bench/gateway_proc.py); the token check runs in
a venv made once under ``~/.cache/tencentdb-offload/bench-venv`` (``$TDO_BENCH_VENV``) with
``bpe-openai`` (o200k_base vocabulary shipped in the package). The plugin itself never
imports anything outside the standard library.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
TOKENIZER = "bpe-openai==0.1.4"


def say(msg: str) -> None:
    print("[bench %s] %s" % (time.strftime("%H:%M:%S"), msg), flush=True)


def load() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


# -- token check (venv) ---------------------------------------------------------------------

def bench_venv() -> Optional[Path]:
    root = Path(os.environ.get("TDO_BENCH_VENV") or
                Path.home() / ".cache" / "tencentdb-offload" / "bench-venv")
    py = root / "bin" / "python"
    marker = root / ".tdo-bench"
    if py.exists() and marker.exists() and marker.read_text() == TOKENIZER:
        return py
    say("creating %s with %s (once)" % (root, TOKENIZER))
    try:
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(root)], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, timeout=300)
        subprocess.run([str(py), "-m", "pip", "install", "-q", TOKENIZER], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, timeout=600)
        marker.write_text(TOKENIZER)
        return py
    except (subprocess.SubprocessError, OSError) as exc:
        say("cannot install %s: %s" % (TOKENIZER, exc))
        return None


def token_rows(skipped: List[str]) -> List[Dict[str, Any]]:
    import cases
    py = bench_venv()
    if py is None:
        skipped.append("token estimate vs o200k: %s could not be installed into the bench venv "
                       "(no registry access?); row skipped" % TOKENIZER)
        return []
    proc = subprocess.run([str(py), str(HERE / "tokcheck.py")], capture_output=True, text=True,
                          timeout=300)
    if proc.returncode != 0:
        skipped.append("token estimate vs o200k: tokcheck failed: %s" % proc.stderr.strip()[-300:])
        return []
    data = json.loads(proc.stdout)
    rows = []
    for cls, d in data["classes"].items():
        med = d["median_err_pct"]
        rows.append(cases.row(
            "tokens/" + cls, "token estimate vs o200k", "%s (%d samples, %s chars)"
            % (cls, d["n"], "{:,}".format(d["chars"])), "%", med, None, d["n"], None,
            "", "median error within ±10 %", abs(med) <= 10,
            note="error range %.0f … %.0f %% (p10 … p90 %.0f … %.0f %%); o200k %.2f chars/token; "
            "estimate %d vs o200k %d tokens in total; %s" % (
                d["min_err_pct"], d["max_err_pct"], d["p10_err_pct"], d["p90_err_pct"],
                d["chars_per_token"], d["estimate_tokens"], d["o200k_tokens"], data["tokenizer"]),
            group="tokens", p10=d["p10_err_pct"], p90=d["p90_err_pct"]))
    return rows


def memory_rows(sessions: int) -> List[Dict[str, Any]]:
    proc = subprocess.run([sys.executable, str(HERE / "cases.py"), "memory", "--sessions",
                           str(sessions)], capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise RuntimeError("memory case failed: %s" % proc.stderr[-500:])
    return json.loads(proc.stdout)


def outbox_rows(quick: bool) -> List[Dict[str, Any]]:
    args = [sys.executable, str(HERE / "outbox.py")] + (["--quick"] if quick else [])
    proc = subprocess.run(args, capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        raise RuntimeError("outbox case failed: %s" % proc.stderr[-500:])
    return json.loads(proc.stdout.splitlines()[-1])


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="smaller sizes, fewer runs (~30 s)")
    ap.add_argument("--out", default=str(HERE / "results"), help="results directory")
    ap.add_argument("--slow", action="store_true",
                    help="also the slow cases (messaging_load, ~5 min per host; per_turn_cli, "
                    "~3 min per host) in a full run")
    ap.add_argument("--only", action="append", default=[],
                    help="run only these cases (hooks, host_hooks, should_compress, compress, "
                    "ingest, memory, outbox, recall, redaction, hostile, tokens, messaging_load, "
                    "per_turn_cli); repeatable; the slow ones run only when named or --slow")
    args = ap.parse_args(argv)
    only = set(args.only)

    def want(name: str) -> bool:
        return not only or name in only

    import _common
    import cases
    from _gateway import GatewayProc

    started = time.time()
    results: Dict[str, Any] = {
        "started": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "mode": "quick" if args.quick else "full", "machine": _common.machine(),
        "load_start": load(), "rows": [], "series": {}, "skipped": []}
    rows: List[Dict[str, Any]] = results["rows"]
    q = args.quick
    gw = GatewayProc(body_limit=64_000_000)
    try:
        if want("should_compress"):
            say("should_compress")
            rows += cases.bench_should_compress(q)
        if want("hooks"):
            say("hooks: post_tool_call / pre_llm_call with the Gateway up, refused, hanging")
            rows += cases.bench_hooks(gw, q)
        if want("host_hooks"):
            import host_hooks
            say("host_hooks: the hooks through Hermes %s's plugin manager beside a no-op plugin "
                "(child processes)" % " and ".join(host_hooks.HOSTS))
            rows += host_hooks.rows(gw.url, q, results["skipped"])
        if want("compress"):
            say("building conversations")
            convs = {n: _common.conversation(n) for n in cases._sizes(q)}
            say("local compress()")
            local = cases.bench_compress_local(q, convs)
            rows += local["rows"]
            results["series"]["compress_local"] = local["series"]
            say("compress() through the fake Gateway")
            via = cases.bench_compress_gateway(gw, q, convs)
            rows += via["rows"]
            results["series"]["compress_gateway"] = via["series"]
            say("compress() with the Gateway refused / hanging")
            floor = next((r["median"] for r in local["rows"] if r["id"] == "compress/local/1000"), None)
            rows += cases.bench_compress_down(gw, q, convs, floor)
            del convs
        if want("ingest"):
            say("ingest worker throughput")
            rows += cases.bench_ingest(gw, q)
        if want("hostile"):
            import network
            say("hostile: hung Gateway in fresh processes; cost of the deadline + reply cap")
            rows += network.bench_hung_fresh_process(q)
            rows += network.bench_reply_cap(gw, q)
    finally:
        gw.stop()
    if want("memory"):
        n = 1000 if q else 10000
        say("memory: %d sessions, %d archived results (child process)" % (n, n * 10))
        rows += memory_rows(n)
    if want("outbox"):
        say("outbox: disk cost of a waiting backlog, peak RSS delivering 10 MB results (child)")
        rows += outbox_rows(q)
    if want("recall"):
        say("recall: paging and searching 50 MB archived results (child process)")
        import recall_paging
        rows += recall_paging.rows()
    if want("redaction"):
        say("redaction: masking an ingest body, unmasked beside it (here and in Hermes 0.22's venv)")
        import redaction
        rows += redaction.rows(q)
    if want("tokens"):
        say("token estimate vs o200k")
        rows += token_rows(results["skipped"])
    if "messaging_load" in only or (args.slow and not only):   # slow: only when asked for
        import messaging_load
        say("messaging_load: one Hermes messaging gateway, plugin then built-in (child process)")
        rows += messaging_load.rows(q, results["skipped"])
    if "per_turn_cli" in only or (args.slow and not only):
        import per_turn_cli
        say("per_turn_cli: one process per turn; built-in, plugin, hung and flaky Gateway, "
            "turns interleaved (child process)")
        rows += per_turn_cli.rows(q, results["skipped"])
    results["seconds"] = time.time() - started
    results["load_end"] = load()
    import report
    stem = "partial" if only else ("quick" if q else "latest")
    report.write(results, Path(args.out), stem)
    say("done in %.0f s; wrote %s/%s.{json,md,svg}" % (results["seconds"], args.out, stem))
    print()
    print(report.markdown(results))
    say(report.targets_line(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
