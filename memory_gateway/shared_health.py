"""What every process on this store knows about the Gateway's health, with its age.

``hermes chat -q`` runs one process per turn, so an in-memory circuit breaker forgets a hung
Gateway at every turn. The last verdict ("up" / "down", when, why) lives in a small JSON file
in the store directory, replaced atomically (write a temporary file, then ``os.replace``), one
entry per Gateway URL (keyed by a hash, so no URL or credential is written). A missing or
unreadable file only means "nothing known".
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Dict, Optional

from .errors import GatewayTimeout, GatewayUnavailable

FILE_NAME = "gateway-health.json"
REWRITE_UP_S = 30.0          # an unchanged "up" verdict is refreshed at most this often
MAX_ENTRIES = 16
FUTURE_SLACK_S = 2.0         # a verdict dated later than now by more: the clock went back
DOWN_TRUST_S = 30.0          # a fresh "down" is trusted this long by other processes …
DOWN_TRUST_MAX_S = 300.0     # … doubling with each failed check in a row, up to this


def down_trust_s(entry: Dict[str, Any]) -> float:
    """How long a "down" verdict is trusted: a Gateway that failed ``streak`` checks in a row
    is asked again after 30 s, 60 s, 120 s … at most 5 min (any process that hears from it
    again writes "up" and ends the wait)."""
    streak = entry.get("streak") if isinstance(entry.get("streak"), int) else 1
    return min(DOWN_TRUST_MAX_S, DOWN_TRUST_S * 2 ** max(0, min(streak, 16) - 1))


class SharedHealth:
    def __init__(self, directory: Path, url: str) -> None:
        self.path = Path(directory) / FILE_NAME
        self.key = hashlib.sha256(url.encode("utf-8", "replace")).hexdigest()[:16]
        self._written: Optional[Dict[str, Any]] = None

    def read(self) -> Optional[Dict[str, Any]]:
        """This Gateway's last verdict plus ``age_s``, or None when nothing is known."""
        entry = self._load().get(self.key)
        if not isinstance(entry, dict) or not isinstance(entry.get("at"), (int, float)):
            return None
        age = time.time() - entry["at"]
        if age < -FUTURE_SLACK_S:       # written before the clock stepped back: age unknown
            return None
        return dict(entry, age_s=round(max(0.0, age), 1))

    def _load(self) -> Dict[str, Any]:
        """Every Gateway's entry; {} when the file is missing or unreadable."""
        try:
            with open(self.path, "r", encoding="utf-8") as fh:
                data = json.load(fh)
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def record(self, up: bool, error: str = "") -> None:
        """Note a verdict; an unchanged "up" is rewritten only every ``REWRITE_UP_S``."""
        now = time.time()
        last = self._written
        if up and last and last["up"] and now - last["at"] < REWRITE_UP_S:
            return
        entry = {"up": up, "at": now, "error": error[:300], "pid": os.getpid()}
        data = self._load()
        if not up:                    # failed checks in a row, across processes
            before = data.get(self.key)
            streak = before.get("streak") if isinstance(before, dict) and not before.get("up") else 0
            entry["streak"] = (streak if isinstance(streak, int) else 0) + 1
        self._written = entry
        try:
            self._write(data, entry)
        except (OSError, ValueError):
            pass                      # an unwritable store costs sharing, never a compaction

    def _write(self, data: Dict[str, Any], entry: Dict[str, Any]) -> None:
        data[self.key] = entry
        if len(data) > MAX_ENTRIES:   # old Gateway URLs age out
            keep = sorted(data, key=lambda k: _at(data[k]), reverse=True)[:MAX_ENTRIES]
            data = {k: data[k] for k in keep}
        fd, tmp = tempfile.mkstemp(dir=str(self.path.parent), prefix=".gateway-health-")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(data, fh)
            os.replace(tmp, self.path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise


def _at(entry: Any) -> float:
    return entry.get("at", 0) if isinstance(entry, dict) and isinstance(entry.get("at"), (int, float)) else 0


class HungRoute:
    """A route that took a whole timeout without an answer while ``/health`` still answers (a
    Gateway whose compaction hangs): the general verdict goes back to "up" at the next health
    check, so every per-turn process would wait out that timeout again. This verdict is the
    route's alone: until it ages (``down_trust_s``, doubling with each hang in a row) calls to
    the route fail at once, in every process on this store; an answer ends it."""

    def __init__(self, directory: Path, url: str, route: str) -> None:
        self.route = route
        self._health = SharedHealth(directory, "%s#%s" % (url, route))

    def why_skip(self) -> str:
        """Why not to call the route now ("" to call it)."""
        known = self._health.read()
        if not known or known.get("up") or known["age_s"] >= down_trust_s(known):
            return ""
        return ("%s gave no answer within its timeout %.0f s ago (this or another process); "
                "asked again in %.0f s" % (self.route, known["age_s"],
                                           down_trust_s(known) - known["age_s"]))

    def hung(self, error: str) -> None:
        self._health.record(False, error)

    def answered(self) -> None:
        self._health.record(True)

    def call(self, request: Callable[[], Dict[str, Any]]) -> Dict[str, Any]:
        """``request()`` unless the route is known hung (then ``GatewayUnavailable`` at once);
        a timeout records the hang, an answer ends it."""
        skip = self.why_skip()          # (one read of the shared file)
        if skip:
            raise GatewayUnavailable(skip)
        try:
            data = request()
        except GatewayTimeout as exc:
            self.hung(str(exc))
            raise
        self.answered()
        return data
