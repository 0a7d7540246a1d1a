"""The seed's big-window example keeps working: a 1M-token window with THRESHOLD 0.4 (400K
tokens per request before compaction) against a Gateway with its 1 MiB body limit. Every
compaction goes through the Gateway (the plugin keeps each body under the limit), every request
is valid, and no request exceeds half the window. (The full example, 300 turns, is 18-19 of 18-19
compactions through the Gateway; 60 turns keep this test short.)"""

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))

from tests.fakes.gateway import FakeGateway  # noqa: E402
from helpers import run_cli  # noqa: E402


def test_a_million_token_window_at_threshold_0_4_compacts_through_a_1_mib_gateway(tmp_path):
    with FakeGateway(api_key="k", body_limit=1_048_576) as gw:
        env = {"HERMES_HOME": str(tmp_path / "home"), "TENCENTDB_OFFLOAD_API_KEY": "k"}
        proc = run_cli(["demo", "--gateway", gw.url, "--context-length", "1000000",
                        "--threshold", "0.4", "--turns", "60", "--json"], env=env, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr[-2000:]
        report = json.loads(proc.stdout)
        compacts = [r for r in gw.requests if r.path.rstrip("/").endswith("/compact")]
    s = report["summary"]
    assert report["threshold_tokens"] == 400_000
    assert s["compactions"] >= 2 and s["gateway_compactions"] == s["compactions"], s
    assert s["invalid_requests"] == 0 and s["problems"] == [] and s["errors"] == []
    assert s["largest_request_pct"] < 50
    assert len(compacts) == s["compactions"] and all(r.status == 200 for r in compacts), \
        [(r.status, r.path) for r in compacts]
