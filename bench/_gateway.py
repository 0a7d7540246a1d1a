"""Client side of gateway_proc.py: start the fake Gateway in a child process and steer it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Tuple

HERE = Path(__file__).resolve().parent


class GatewayProc:
    def __init__(self, body_limit: int = 1_048_576) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(HERE / "gateway_proc.py"), "--body-limit", str(body_limit)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
        line = self.proc.stdout.readline().strip()
        if not line.startswith("READY "):
            raise RuntimeError("fake gateway did not start: %r" % line)
        self.url = line.split(" ", 1)[1]

    def _ask(self, **cmd: Any) -> Dict[str, Any]:
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def set_fault(self, kind: str, hang_seconds: float = 60.0) -> None:
        self._ask(cmd="fault", kind=kind, hang_seconds=hang_seconds)

    def clear_fault(self) -> None:
        self._ask(cmd="clear")

    def times(self) -> List[Tuple[str, int]]:
        return [tuple(t) for t in self._ask(cmd="times")["times"]]

    def pair_ids(self, session: str) -> List[str]:
        return self._ask(cmd="pairs", session=session)["ids"]

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:
                self._ask(cmd="quit")
            except Exception:
                pass
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def __enter__(self) -> "GatewayProc":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()
