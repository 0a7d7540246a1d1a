"""The REAL TencentDB Agent Memory Gateway for end-to-end tests.

``../shared/gateway/start-gateway.sh`` (beside the checkout in this project's workplace and in
CI; ``TDO_REAL_GATEWAY_DIR`` names another folder) starts the Gateway's own Node.js service
with a stub LLM for its offload stages. A user's clone has no such folder: the tests that need
it skip with that reason, never fail. Each instance gets its own port, run and data folders,
and is stopped (exactly its two processes) when the test that started it ends.
"""
from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any, Callable, Dict, Optional, Tuple

import pytest

import harness

REPO_ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 240        # the first start on a fresh machine installs its npm packages


def script() -> Optional[Path]:
    """The start script, or None where this checkout has none beside it."""
    raw = os.environ.get("TDO_REAL_GATEWAY_DIR")
    folder = Path(raw) if raw else REPO_ROOT.parent / "shared" / "gateway"
    found = folder / "start-gateway.sh"
    return found if found.is_file() else None


def absent_reason() -> Optional[str]:
    if script() is None:
        return ("the real TencentDB Gateway is not beside this checkout (../shared/gateway/"
                "start-gateway.sh; set TDO_REAL_GATEWAY_DIR to use one elsewhere)")
    return None


class RealGateway:
    """One running instance: ``url`` while started; ``stop()`` ends exactly its processes."""

    def __init__(self, run_dir: Path, *, latency_ms: int = 0):
        self.port = harness.free_port()
        self.run_dir = run_dir
        self.url = ""
        self.env: Dict[str, str] = dict(
            os.environ, GW_PORT=str(self.port), GW_LLM_PORT=str(harness.free_port()),
            GW_RUN_DIR=str(run_dir / "run"), GW_DATA_DIR=str(run_dir / "data"),
            GW_STUB_LATENCY_MS=str(latency_ms), GW_START_TIMEOUT="120")

    def start(self) -> "RealGateway":
        (self.run_dir / "data").mkdir(parents=True, exist_ok=True)
        done = subprocess.run(["bash", str(script())], env=self.env, capture_output=True,
                              text=True, timeout=START_TIMEOUT_S, stdin=subprocess.DEVNULL)
        for line in done.stdout.splitlines():
            if line.startswith("GATEWAY_URL="):
                self.url = line.split("=", 1)[1].strip()
        if done.returncode != 0 or not self.url:
            raise RuntimeError("the real Gateway did not start (exit %d):\n%s%s\n%s" % (
                done.returncode, done.stdout[-1500:], done.stderr[-1500:], self.log_tail()))
        return self

    def log_tail(self, limit: int = 2000) -> str:
        log = self.run_dir / "run" / "gateway.log"
        return log.read_text(errors="replace")[-limit:] if log.exists() else ""

    def stop(self) -> None:
        subprocess.run(["bash", str(script()), "--stop"], env=self.env, capture_output=True,
                       text=True, timeout=60, stdin=subprocess.DEVNULL)
        self.url = ""


ARM = "plugin+gateway"
EVERY_HOST = ("0.19", "0.22")     # the hosts whose suites run the real Gateway's arm
CURRENT_HOST = ("0.22",)


def skip_reason(hosts: Tuple[str, ...] = EVERY_HOST) -> Optional[str]:
    """Why a suite runs no real-Gateway arm here: none beside the checkout, or a suite that
    runs it on ``hosts`` only (the full test run must stay CPU-affordable on 2 cores)."""
    absent = absent_reason()
    if absent:
        return absent
    if not (harness.hermes_version() or "").startswith(hosts):
        return "this suite runs its real-Gateway arm on Hermes %s only (test time)" % ", ".join(hosts)
    return None


def at_once_with_gateway(run: Callable[..., Any], arms: Dict[str, tuple], tmp_path_factory: Any,
                         hosts: Tuple[str, ...] = EVERY_HOST) -> Dict[str, Any]:
    """``harness.at_once(run, arms)`` plus the arm ``ARM``: ``run(ARM, tmp, url)`` with a real
    Gateway of its own, where one is beside the checkout and the host is one of ``hosts``. The
    Gateway starts (~10 s, mostly waiting for its health check) while the other arms already
    run, and is stopped when its arm ends, not after the slowest one."""
    if skip_reason(hosts) is not None:
        return harness.at_once(run, arms)
    gateway = RealGateway(tmp_path_factory.mktemp("real-gateway"))

    def with_gateway(tmp: Path) -> Any:
        try:
            return run(ARM, tmp, gateway.start().url)
        finally:
            gateway.stop()

    return harness.at_once(lambda name, *rest: with_gateway(*rest) if name == ARM else run(name, *rest),
                           {**arms, ARM: (ARM, tmp_path_factory.mktemp("pg"))})


def arm(rows: Dict[str, Any], hosts: Tuple[str, ...] = EVERY_HOST) -> Any:
    """The plugin's row with the real Gateway; the test skips where none ran (``skip_reason``)."""
    reason = skip_reason(hosts)
    if reason:
        pytest.skip(reason)
    return rows[ARM]
