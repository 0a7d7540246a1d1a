"""Shared bench helpers: load the plugin package, build runtimes and conversations, stats.

Stdlib only (the token-accuracy step runs in a separate venv; see tokcheck.py).
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import platform
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

ROOT = Path(__file__).resolve().parent.parent      # the plugin directory (repo root)
BENCH = Path(__file__).resolve().parent
ns = time.perf_counter_ns


def load_plugin(name: str = "tencentdb_offload"):
    """Import the repo root as the package ``tencentdb_offload`` (the tests' loader, which
    needs no pytest: the tokenizer venv has none)."""
    if str(ROOT / "tests") not in sys.path:
        sys.path.insert(0, str(ROOT / "tests"))
    from plugin_loader import load_plugin as load
    return load(name)


# -- statistics --------------------------------------------------------------------------

def pct(values: List[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100); with fewer than 100 samples p99 is the max."""
    s = sorted(values)
    if not s:
        return float("nan")
    k = max(0, min(len(s) - 1, int(-(-q * len(s) // 100)) - 1))
    return s[k]


def summary(values_ns: List[int]) -> Dict[str, float]:
    """median / p99 / n of nanosecond samples, in microseconds."""
    us = [v / 1000.0 for v in values_ns]
    return {"median_us": statistics.median(us), "p99_us": pct(us, 99), "n": len(us)}


def timed(fn: Callable[[], Any], reps: int, between: Optional[Callable[[], Any]] = None,
          warmup: int = 3, cpu: Optional[List[int]] = None) -> List[int]:
    """Run ``fn`` ``reps`` times (after ``warmup`` untimed runs); ``between`` runs untimed.

    Returns wall-clock samples; if ``cpu`` is a list, the calling thread's CPU time of each
    run is appended to it (time the thread was not running — another process on the core,
    another thread holding the GIL — is in the wall time only)."""
    for _ in range(warmup):
        fn()
        if between:
            between()
    out = []
    tt = time.thread_time_ns
    for _ in range(reps):
        c0 = tt()
        t0 = ns()
        fn()
        out.append(ns() - t0)
        if cpu is not None:
            cpu.append(tt() - c0)
        if between:
            between()
    return out


def cpu_note(cpu_ns: List[int], unit: str = "ms") -> str:
    if not cpu_ns:
        return ""
    s = summary(cpu_ns)

    def f(us: float) -> str:
        if unit == "µs" and us < 1000:
            return "%.0f µs" % us
        ms = us / 1000.0
        return "%.1f ms" % ms if ms < 100 else "%.0f ms" % ms
    return "on-CPU (thread time) median %s / p99 %s" % (f(s["median_us"]), f(s["p99_us"]))


# -- machine -----------------------------------------------------------------------------

def machine() -> Dict[str, Any]:
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        cpu = platform.processor()
    mem = ""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                mem = "%.1f GiB" % (int(line.split()[1]) / 1024 / 1024)
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "memory": mem,
            "python": platform.python_version(), "implementation": platform.python_implementation(),
            "os": "%s %s" % (platform.system(), platform.release())}


def rss_kb() -> int:
    """Resident memory of this process now, KiB, as ``ps`` reports it (0 without ps).

    Not read from /proc/self: Hermes' install scanner flags a plugin tree that reads its own
    process files, and the bench ships inside the plugin directory. Not getrusage either: its
    peak survives fork and exec, so a child would report its parent's."""
    try:
        out = subprocess.run(["ps", "-o", "rss=", "-p", str(os.getpid())], capture_output=True,
                             text=True, timeout=10).stdout.strip()
        return int(out)
    except (OSError, ValueError, subprocess.SubprocessError):
        return 0


class PeakRSS:
    """``with PeakRSS() as peak: …`` then ``peak.kb``: the highest resident memory seen while
    the block ran (sampled every ``interval`` s by a thread) above what it was at the start."""

    def __init__(self, interval: float = 0.02) -> None:
        import threading
        self.interval, self.kb, self.base = interval, 0, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> "PeakRSS":
        self.base = rss_kb()
        self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._stop.wait(self.interval):
            self.kb = max(self.kb, rss_kb() - self.base)

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()
        self.kb = max(self.kb, rss_kb() - self.base)


# -- runtimes ----------------------------------------------------------------------------

class Bed:
    """A runtime + engine in a temporary HERMES_HOME; ``close()`` removes everything."""

    def __init__(self, gateway_url: str = "off", context_length: int = 128_000,
                 session: str = "bench", **settings: Any) -> None:
        plugin = load_plugin()
        from tencentdb_offload.hooks import HookHandlers
        self.tmp = tempfile.TemporaryDirectory(prefix="tdo-bench-")
        env = {"HERMES_HOME": os.path.join(self.tmp.name, "home"),
               "TENCENTDB_OFFLOAD_GATEWAY_URL": gateway_url}
        env.update({"TENCENTDB_OFFLOAD_" + k.upper(): str(v) for k, v in settings.items()})
        self.runtime = plugin.build_runtime(env=env)
        self.engine = plugin.open_session(self.runtime, session, context_length, model="bench-model")
        self.hooks = HookHandlers(self.runtime)

    def close(self) -> None:
        try:
            self.runtime.close()
        finally:
            self.tmp.cleanup()


def settle() -> None:
    gc.collect()


# -- data --------------------------------------------------------------------------------

_WORDS = ("the of and to in is for on that with as by this from at are be or an it was "
          "error file line return value config request response token session cache build "
          "test module import function class object string number list index path status "
          "server client timeout retry buffer stream parser handler result output input").split()


def text_blob(chars: int, seed: int = 1) -> str:
    """Deterministic English-like text of exactly ``chars`` characters."""
    rng = random.Random(seed)
    parts, n = [], 0
    while n < chars:
        line = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(6, 14))) + ".\n"
        parts.append(line)
        n += len(line)
    return "".join(parts)[:chars]


_POOL = text_blob(200_000, seed=7)


def slice_text(i: int, size: int) -> str:
    start = (i * 7919) % (len(_POOL) - size) if size < len(_POOL) else 0
    s = _POOL[start:start + size]
    while len(s) < size:
        s += _POOL[:size - len(s)]
    return s


def conversation(messages: int, result_chars: int = 8_000, prefix: str = "c") -> List[Dict[str, Any]]:
    """``messages`` messages in OpenAI shape: user, assistant tool call, tool result, assistant
    text, repeated (about ``result_chars`` + 250 bytes per 4 messages), system prompt first."""
    out: List[Dict[str, Any]] = [{"role": "system", "content": "You are a coding agent. " * 20}]
    i = 0
    while len(out) < messages:
        cid = "%s_call_%d" % (prefix, i)
        out.append({"role": "user", "content": "turn %d: please continue with step %d of the plan" % (i, i)})
        out.append({"role": "assistant", "content": "",
                    "tool_calls": [{"id": cid, "type": "function", "function": {
                        "name": "read_file", "arguments": json.dumps({"path": "/src/mod_%d.py" % i})}}]})
        out.append({"role": "tool", "tool_call_id": cid, "content": slice_text(i, result_chars)})
        out.append({"role": "assistant", "content": "Step %d is done; the file looks fine." % i})
        i += 1
    out = out[:messages]
    while out and (out[-1]["role"] in ("tool",) or out[-1].get("tool_calls")):
        out.pop()
    if out[-1]["role"] != "user":
        out.append({"role": "user", "content": "now summarise what you found and fix the bug"})
    return out


def json_bytes(messages: Any) -> int:
    return len(json.dumps(messages, ensure_ascii=False).encode("utf-8"))
