"""The host's exit crash: a ``hermes chat`` turn that died by a signal after its output was complete.

Hermes 0.22.2 sometimes dies with SIGSEGV (rc=-11) after it printed its answer and its
``session_id:`` line: an ``atexit`` hook of ``agent/relay_runtime.py`` closes the NeMo Relay
plugin host (``asyncio.run(PluginHostActivation.close())``), a nemo_relay tokio thread is still
calling into Python when ``Py_FinalizeEx`` starts, CPython ends that thread with
``pthread_exit`` and the forced unwind through Rust frames crashes the process. It happens
with no plugin installed. Such a turn did everything a turn does (answer, session saved, id
printed; every ``atexit`` hook, the plugin's included, runs before finalization), so its result
is used; it is never retried, and it is recorded so a reader sees it:

- a ``HostExitCrash`` warning (pytest's warnings summary) and a section of the terminal summary
  (``tests/e2e/conftest.py``);
- one JSON line per crash in ``host-exit-crashes.jsonl`` next to the test's HERMES_HOME and in
  the suite-wide log ``$TDO_EXIT_CRASH_LOG`` (default
  ``~/.cache/tencentdb-offload/host-exit-crashes.jsonl``), with the evidence: rc, signal, the
  last stderr lines before the crash, the faulthandler traceback (children run with
  ``PYTHONFAULTHANDLER=1``) and whether any frame of it is the plugin's.

Anything else (a signal before the session id, no session id, a non-zero exit status, a
timeout, SIGKILL/SIGTERM) is not an exit crash and fails the turn as before.

Import it as ``tests.e2e.exit_crash`` (as the harness and ``conftest.py`` do): under another
name it would be a second module with its own ``RECORDED``.
"""
from __future__ import annotations

import json
import os
import re
import signal
import time
import warnings
from pathlib import Path
from typing import Any, Dict, List, Optional

# signals a crashing process dies by (not SIGKILL / SIGTERM: someone stopped it)
CRASH_SIGNALS = {signal.SIGSEGV, signal.SIGABRT, signal.SIGBUS, signal.SIGILL, signal.SIGFPE}
FAULT_START = re.compile(r"^Fatal Python error: ", re.M)
FRAME = re.compile(r'^\s*File "([^"]+)", line (\d+) in (\S+)', re.M)
PLUGIN_PATH = re.compile(r"[/\\]plugins[/\\]tencentdb-offload[/\\]|[/\\]tencentdb_offload[/\\]")
SESSION_LINE = re.compile(r"^session_id:\s*\S+\s*$", re.M)
RECORD_NAME = "host-exit-crashes.jsonl"
RECORDED: List[Dict[str, Any]] = []     # this process's records (for the terminal summary)


class HostExitCrash(UserWarning):
    """Hermes died by a signal after its turn's output was complete (see the module doc)."""


def signal_name(returncode: int) -> str:
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return "signal %d" % -returncode


def fault_report(stderr: str) -> str:
    """The faulthandler dump at the end of stderr ('' when there is none)."""
    found = list(FAULT_START.finditer(stderr))
    return stderr[found[-1].start():] if found else ""


def plugin_frames(traceback: str) -> List[str]:
    """Frames of the dump that run the plugin's code (``file:line in function``)."""
    return ["%s:%s in %s" % m.groups() for m in FRAME.finditer(traceback) if PLUGIN_PATH.search(m.group(1))]


def evidence(returncode: int, stdout: str, stderr: str) -> Optional[Dict[str, Any]]:
    """The crash's evidence if this finished run was the host's exit crash, else None: killed
    by a crash signal after the answer (stdout) and the ``session_id:`` line (stderr, the last
    thing a turn prints) were written."""
    if returncode >= 0 or -returncode not in {int(s) for s in CRASH_SIGNALS}:
        return None
    ids = list(SESSION_LINE.finditer(stderr))
    if not ids or not stdout.strip():
        return None
    trace = fault_report(stderr)
    return {"rc": returncode, "signal": signal_name(returncode),
            "stderr_tail": stderr[:len(stderr) - len(trace)].splitlines()[-15:],
            "faulthandler": trace[-8000:],
            "faulthandler_threads": len(re.findall(r"^(?:Current thread|Thread) 0x", trace, re.M)),
            "plugin_frames": plugin_frames(trace)}


def suite_log() -> Path:
    raw = os.environ.get("TDO_EXIT_CRASH_LOG")
    return Path(raw) if raw else Path.home() / ".cache" / "tencentdb-offload" / RECORD_NAME


def record(home: Path, turn: int, prompt: str, session_id: str, seconds: float,
           found: Dict[str, Any], hermes: str = "") -> Dict[str, Any]:
    """Write the crash where a reader finds it (see the module doc) and warn."""
    entry = dict(found, at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), hermes=hermes,
                 test=os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" (", 1)[0], turn=turn,
                 prompt=prompt[:200], session_id=session_id, seconds=round(seconds, 1),
                 home=str(home))
    line = json.dumps(entry, ensure_ascii=False) + "\n"
    for path in (Path(home).parent / RECORD_NAME, suite_log()):
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "a", encoding="utf-8") as out:
                out.write(line)
        except OSError:
            pass            # the warning below still tells
    RECORDED.append(entry)
    warnings.warn(HostExitCrash(describe(entry)), stacklevel=3)
    return entry


def describe(entry: Dict[str, Any]) -> str:
    plugin = ("plugin frames in the traceback: %s" % ", ".join(entry["plugin_frames"])
              if entry["plugin_frames"] else "no plugin frame in the traceback")
    return ("host exit crash: hermes %s turn %s (%s) died by %s (rc=%d) after printing its answer "
            "and session_id %s; result used, not retried; %s; record: %s" % (
                entry.get("hermes") or "?", entry["turn"], entry.get("test") or "?",
                entry["signal"], entry["rc"], entry["session_id"], plugin,
                Path(entry["home"]).parent / RECORD_NAME))
