#!/usr/bin/env python3
"""Hostile-network rows: compaction in fresh processes against a hung Gateway (default
settings, one process per turn like ``hermes chat -q``), and the cost of the whole-exchange
deadline and reply cap on normal replies (our transport vs ``http.client``).

``python3 bench/network.py child URL HERMES_HOME`` is one "turn": a fresh process that builds
the runtime with default settings and times one compress(); it prints JSON.
"""

from __future__ import annotations

import http.client
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common  # noqa: E402

TURNS = 6


def child(url: str, home: str) -> None:
    _common.load_plugin()
    import tencentdb_offload as plugin
    from tencentdb_offload.engine import TencentDBOffloadEngine
    env = {"HERMES_HOME": home, "TENCENTDB_OFFLOAD_GATEWAY_URL": url}
    conv = _common.conversation(400)
    runtime = plugin.build_runtime(env=env)
    engine = TencentDBOffloadEngine(runtime)
    engine.update_model(model="m", context_length=32_000)
    engine.on_session_start("bench-turn")
    t0 = time.perf_counter()
    out = engine.compress(conv, current_tokens=60_000)
    took = time.perf_counter() - t0
    print(json.dumps({"seconds": took, "messages": len(out), "mode": runtime.mode}))
    sys.stdout.flush()
    runtime.writer.close()      # the hung ingest worker is a daemon: exit without waiting


def _turns(url: str, home: str, turns: int) -> List[float]:
    out = []
    for _ in range(turns):
        proc = subprocess.run([sys.executable, __file__, "child", url, home], capture_output=True,
                              text=True, timeout=300)
        if proc.returncode != 0:
            raise RuntimeError("hostile child failed: %s" % proc.stderr[-500:])
        out.append(json.loads(proc.stdout.strip().splitlines()[-1])["seconds"])
    return out


def bench_hung_fresh_process(quick: bool) -> List[Dict[str, Any]]:
    import cases
    from fakes.hostile import HostilePeer
    turns = 3 if quick else TURNS
    with tempfile.TemporaryDirectory() as tmp:
        local = _turns("off", str(Path(tmp) / "local"), turns)
        with HostilePeer({"/health": ("hang", None), "/v2/offload/compact": ("hang", None),
                          "/v2/offload/ingest": ("hang", None)}) as peer:
            hung = _turns(peer.url, str(Path(tmp) / "hung"), turns)
    floor = statistics.median(local)
    total_ratio = sum(hung) / sum(local)
    return [cases.row(
        "hostile/hung_fresh_process", "compress() in a fresh process, Gateway hung",
        "%d processes in a row, one compress() each, default settings (TIMEOUT_MS 90 s)" % turns,
        "s", statistics.median(hung), max(hung), turns, floor, "same with no Gateway",
        "every turn ≤ 2 s", max(hung) <= 2.0,
        note="per turn: %s s (first asks /health for ≤ 1 s, the next ones trust the shared "
        "verdict); session total %.2f s vs %.2f s with no Gateway (%.2f×)" % (
            ", ".join("%.2f" % t for t in hung), sum(hung), sum(local), total_ratio),
        group="hostile")]


def bench_reply_cap(gw: Any, quick: bool) -> List[Dict[str, Any]]:
    """A normal /compact round trip: our deadline+cap transport vs plain ``http.client``."""
    import cases
    from tencentdb_offload.memory_gateway.client import GatewayClient, encode_compact
    from urllib.parse import urlsplit
    msgs = _common.conversation(200, 2_000)
    body = encode_compact("hermes-bench-cap", msgs, ratio=0.1, context_window=10 ** 6,
                          total_tokens=1000)
    client = GatewayClient(gw.url, "local", "default", body_limit=64_000_000)
    parts = urlsplit(gw.url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    headers = {"Authorization": "Bearer local", "x-tdai-service-id": "default",
               "Content-Type": "application/json", "Accept": "application/json"}
    reply_bytes = [0]

    def ours() -> None:
        client._call("/v2/offload/compact", body, 30.0)

    def plain() -> None:
        conn.request("POST", "/v2/offload/compact", body=body, headers=headers)
        raw = conn.getresponse().read()
        reply_bytes[0] = len(raw)
        json.loads(raw.decode("utf-8"))     # as the client does

    reps = 15 if quick else 60
    a, b = [], []
    for _ in range(3):                      # interleaved, so load drifts hit both alike
        a += _common.timed(ours, reps // 3)
        b += _common.timed(plain, reps // 3)
    client.close()
    conn.close()
    med_ours, med_plain = statistics.median(a) / 1e6, statistics.median(b) / 1e6
    return [cases.row(
        "hostile/reply_cap_cost", "normal /compact round trip, deadline + reply cap",
        "%s KB request, %s KB reply, fake Gateway in a child process" % (
            len(body) // 1024, reply_bytes[0] // 1024),
        "ms", med_ours, _common.pct([v / 1e6 for v in a], 99), len(a), med_plain,
        "http.client, no deadline, no cap", "≤ 1.10× http.client", med_ours <= med_plain * 1.10,
        group="hostile")]


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "child":
        child(sys.argv[2], sys.argv[3])
    else:
        sys.exit("usage: network.py child URL HERMES_HOME (run.py runs the hostile rows)")
