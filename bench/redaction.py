#!/usr/bin/env python3
"""Bench rows for redaction: what masking an ingest body costs the sender, per ingest.

One tool pair (a ``terminal`` result of 1 KB and of 100 KB: a build log with code, hashes and
paths, and two secrets) goes through what the sender does before it sends: the body masked
(``GatewayClient.outbound``, Hermes' redactor then the plugin's patterns inside a Hermes venv,
the plugin's patterns alone outside) and encoded, next to the same body encoded unmasked
(``TENCENTDB_OFFLOAD_REDACT=false``: today's cost without redaction). It runs in this
interpreter and, where it exists, in the Hermes 0.22 venv (``--child`` prints its samples).
The hook's own hand-off does no redaction (bench ``hooks`` measures it).
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common  # noqa: E402

LINES = ("[%05d] compiling src/module_%d.py (sha256 e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca4959"
         "91b7852b855) ok\n", "    def handler_%d(self, request_id: str) -> None:  # /srv/app/%d.py 123e4567-e89b-12d3\n")
SECRETS = "export OPENAI_API_KEY=sk-proj-Qm4v8XcT2bN7rL9pW3sK6yH1jF5dA0gZ\nDB_PASSWORD=correcthorsebattery\n"
SIZES = {"1KB": 1_000, "100KB": 100_000}


def result_text(size: int) -> str:
    out, i = [], 0
    while sum(map(len, out)) < size - len(SECRETS):
        out.append(LINES[i % 2] % (i, i))
        i += 1
    half = len(out) // 2
    return "".join(out[:half]) + SECRETS + "".join(out[half:])


def samples(reps: int) -> Dict[str, Any]:
    _common.load_plugin()
    from tencentdb_offload.context import redact
    from tencentdb_offload.memory_gateway.client import GatewayClient
    out: Dict[str, Any] = {"source": redact.source(), "python": sys.executable}
    for label, size in SIZES.items():
        text = result_text(size)
        runs = itertools.count()

        def body() -> Dict[str, Any]:      # each ingest's result is new (none is remembered)
            return {"session_id": "hermes-bench", "tool_pairs": [{
                "tool_name": "terminal", "tool_call_id": "call_1", "params": {"command": "make build"},
                "result": "run %d\n" % next(runs) + text, "timestamp": "2026-01-01T00:00:00.000Z"}]}
        for arm, on in (("masked", True), ("unmasked", False)):
            client = GatewayClient("http://127.0.0.1:9", "k", "i", redactor=redact.Redactor(on))

            def send_prep() -> bytes:
                sent = client.outbound("hermes-bench", "/v2/offload/ingest", body())
                return json.dumps(sent, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
            n = reps if size < 10_000 else max(20, reps // 10)
            out["%s/%s" % (label, arm)] = _common.timed(send_prep, n, warmup=5)
            masked = client.outbound("hermes-bench", "/v2/offload/ingest", body())
            out["%s/%s/leaked" % (label, arm)] = "correcthorsebattery" in json.dumps(masked)
    return out


def _rows_of(data: Dict[str, Any], where: str) -> List[Dict[str, Any]]:
    rows = []
    for label in SIZES:
        masked = _common.summary(data["%s/masked" % label])
        plain = _common.summary(data["%s/unmasked" % label])
        rows.append(redact_row(where, label, masked, plain, data))
    return rows


def redact_row(where: str, label: str, masked: Dict[str, float], plain: Dict[str, float],
          data: Dict[str, Any]) -> Dict[str, Any]:
    import cases
    return cases.row(
        "redact/ingest/%s/%s" % (where, label), "redaction per ingest (sender thread)",
        "%s result, %s" % (label, where), "µs", masked["median_us"], masked["p99_us"],
        int(masked["n"]), plain["median_us"], "the same ingest unmasked (REDACT=false)",
        "secrets masked; off the hook's thread", not data["%s/masked/leaked" % label],
        note="unmasked p99 %.0f µs; masked by %s" % (plain["p99_us"], data["source"]),
        group="redaction")


def rows(quick: bool = False) -> List[Dict[str, Any]]:
    reps = 200 if quick else 1000
    out = _rows_of(samples(reps), "plugin patterns")
    py = Path.home() / ".cache" / "tencentdb-offload" / "venvs" / "hermes-0.22.2" / "bin" / "python"
    if py.exists():
        proc = subprocess.run([str(py), __file__, "--child", str(reps)], capture_output=True,
                              text=True, timeout=600)
        if proc.returncode == 0:
            out += _rows_of(json.loads(proc.stdout.splitlines()[-1]), "Hermes 0.22 + plugin")
    return out


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        print(json.dumps(samples(int(sys.argv[2]))))
    else:
        for r in rows("--quick" in sys.argv):
            print("%-44s median %8.1f µs  p99 %8.1f µs  (unmasked %8.1f µs)" % (
                r["id"], r["median"], r["p99"], r["floor"]))
