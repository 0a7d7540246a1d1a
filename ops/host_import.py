"""Doctor's check that Hermes' own ``agent.context_engine`` imports in Hermes' Python.

When it raises (a broken Hermes install, a dependency that fails at import), the plugin's
engine cannot subclass the host's base class; Hermes then rejects it and compacts with its
built-in compressor, which a user would otherwise never notice.
"""

from __future__ import annotations

import subprocess
from typing import Any

# prints nothing when the module imports or Hermes is simply not installed there
_ASK = ("import sys\n"
        "try:\n"
        "    import agent.context_engine\n"
        "except ModuleNotFoundError as e:\n"
        "    if e.name not in ('agent', 'agent.context_engine'):\n"
        "        print('%s: %s' % (type(e).__name__, e))\n"
        "except Exception as e:\n"
        "    print('%s: %s' % (type(e).__name__, e))\n")


def check_host_import(c: Any, python: str) -> None:
    """Adds a failing line when ``agent.context_engine`` exists but raises on import."""
    try:
        out = subprocess.run([python, "-B", "-c", _ASK], capture_output=True, text=True,
                             timeout=60, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return
    problem = out.stdout.strip()[:300]
    if problem:
        c.add("hermes-import", "fail", "importing Hermes' agent.context_engine fails (%s): Hermes "
              "rejects this engine and silently compacts with its built-in compressor" % problem,
              "repair the Hermes install (reinstall hermes-agent in its environment)")
