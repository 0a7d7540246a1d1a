#!/usr/bin/env python3
"""Import + ``register()`` of the plugin timed as Hermes 0.22 times it (``plugins.load_timeout_seconds``,
default 10 s: a plugin over it is refused), through Hermes' own plugin manager.

The parent makes a HERMES_HOME like a user's (harness ``make_home``: the plugin copied in,
enabled, the engine selected), fills its store (``--items`` archived results of 10 KB, as many
compaction events, a backlog of undelivered outbox rows) and points the Gateway URL at a socket
that accepts and never answers (a hung Gateway). Each round runs a fresh child of the Hermes
venv (``--child``): a cold import, no bytecode cache (``PYTHONDONTWRITEBYTECODE``, the copy has
none), which wraps the host's ``run_with_load_deadline`` to time exactly what the deadline
covers, and calls ``discover_plugins()``. The parent counts the connections the hung Gateway
accepted before the child's load returned: the load path makes none.

Usage: ``<hermes-0.22.2 venv>/bin/python bench/register_time.py [--rounds 5] [--items 20000]``.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Dict, List

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))       # tests.e2e.harness (appended after: the plugin never shadows)


def child() -> None:
    import hermes_cli.plugins as hp
    import hermes_cli.plugins_loader as loader
    timed: Dict[str, float] = {}
    real = loader.run_with_load_deadline

    def timing(key: str, ctx: Any, fn: Any) -> Any:
        started = time.perf_counter()
        try:
            return real(key, ctx, fn)
        finally:
            timed[key] = (time.perf_counter() - started) * 1000
    loader.run_with_load_deadline = timing
    started = time.perf_counter()
    hp.discover_plugins()
    total = (time.perf_counter() - started) * 1000
    engine = hp.get_plugin_manager()._context_engine if hasattr(hp.get_plugin_manager(), "_context_engine") else None
    print(json.dumps({"load_ms": timed, "discover_ms": total, "returned_at": time.time(),
                      "engine": type(engine).__name__ if engine is not None else None}), flush=True)


class HungGateway:
    """Accepts every connection and never answers; records when each came."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.url = "http://127.0.0.1:%d" % self.sock.getsockname()[1]
        self.accepted: List[float] = []
        self.held: List[socket.socket] = []
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted.append(time.time())
            self.held.append(conn)


def fill_store(directory: Path, items: int) -> int:
    """``items`` archived 10 KB results, as many compaction events and outbox rows: a store a
    long life leaves. Returns its size in bytes."""
    directory.mkdir(parents=True, exist_ok=True)
    from tests.plugin_loader import load_plugin
    plugin = load_plugin()
    plugin.build_runtime(env={"HERMES_HOME": str(directory.parent),
                              "TENCENTDB_OFFLOAD_GATEWAY_URL": "off"}).close()     # the schema
    conn = sqlite3.connect(str(directory / "store.db"))
    now, body = time.time(), "result line of a tool\n" * 480
    conn.executemany("INSERT INTO archive(session,item_key,kind,tool_call_id,tool_name,role,args,"
                     "content,chars,created) VALUES (?,?,'tool_result',?,'read_file','tool','{}',?,?,?)",
                     (("s%d" % (i % 50), "call_%d" % i, "call_%d" % i, body, len(body), now - i)
                      for i in range(items)))
    conn.executemany("INSERT INTO events(ts,session,kind,data) VALUES (?,?,'compaction',?)",
                     ((now - i, "s%d" % (i % 50), json.dumps({"route": "local", "tokens_before": 9,
                                                              "tokens_after": 4})) for i in range(items)))
    conn.executemany("INSERT INTO outbox(session,kind,payload,created,bytes) VALUES (?,'ingest',?,?,?)",
                     (("s%d" % (i % 50), "{}", now - i, 2) for i in range(items)))
    conn.commit()
    conn.close()
    return sum(p.stat().st_size for p in directory.iterdir())


def parent(rounds: int, items: int, gateway_off: bool = False) -> Dict[str, Any]:
    from tests.e2e.harness import make_home
    gateway = HungGateway()
    with tempfile.TemporaryDirectory() as tmp:
        url = "off" if gateway_off else gateway.url
        home = make_home(Path(tmp), "http://127.0.0.1:9", env={"TENCENTDB_OFFLOAD_GATEWAY_URL": url})
        size = fill_store(home / "tencentdb-offload", items)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("TENCENTDB_OFFLOAD_", "HERMES_"))}
        env.update(HERMES_HOME=str(home), PYTHONDONTWRITEBYTECODE="1")
        runs = []
        for _ in range(rounds):
            before = len(gateway.accepted)
            proc = subprocess.run([sys.executable, __file__, "--child"], capture_output=True, text=True,
                                  env=env, timeout=300, cwd=tmp)
            line = [x for x in proc.stdout.splitlines() if x.startswith("{")]
            if proc.returncode or not line:
                raise SystemExit("child failed: %s" % proc.stderr[-2000:])
            out = json.loads(line[-1])
            out["connections_during_load"] = sum(1 for t in gateway.accepted[before:] if t <= out["returned_at"])
            runs.append(out)
    ours = sorted(r["load_ms"].get("tencentdb-offload", -1) for r in runs)
    return {"rounds": rounds, "store_bytes": size, "items": items, "gateway": "off" if gateway_off else "hung",
            "plugin_load_ms": [round(x) for x in ours],
            "median_ms": ours[len(ours) // 2], "max_ms": ours[-1],
            "connections_during_load": [r["connections_during_load"] for r in runs],
            "discover_ms": [round(r["discover_ms"]) for r in runs]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--items", type=int, default=20_000)
    ap.add_argument("--gateway-off", action="store_true", help="no Gateway (the comparison arm)")
    args = ap.parse_args()
    if args.child:
        child()
        return
    print(json.dumps(parent(args.rounds, args.items, args.gateway_off)))


if __name__ == "__main__":
    main()
