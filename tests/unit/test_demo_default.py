"""The README's main command, exactly as documented, must succeed (it exits 1 when any
request it sent was invalid, exceeded the window, or a recall did not match)."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_default_demo_succeeds(tmp_path):
    env = {"HERMES_HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin",
           "TENCENTDB_OFFLOAD_GATEWAY_URL": "off"}
    proc = subprocess.run([sys.executable, ".", "demo", "--json"], cwd=str(ROOT), env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = json.loads(proc.stdout)["summary"]
    assert summary["invalid_requests"] == 0 and summary["problems"] == []
    assert summary["compactions"] >= 3 and summary["no_progress_calls"] == 0
    assert summary["largest_request_pct"] < 100
