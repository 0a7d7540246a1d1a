"""Builders shared by the unit tests: conversations, runtimes, engines."""

from __future__ import annotations

import io
import json
import logging
import os
import random
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence
from urllib.parse import urlsplit

import pytest

import tencentdb_offload as plugin
from tencentdb_offload.settings.config import Settings

DEFAULT_PORT = urlsplit(Settings().gateway_url).port     # the plugin's default Gateway URL's


# what Hermes 0.22 does (docs/hosts.md); 0.17 and 0.19 do none of it
SELECTING_HOST = dict(selects_context=True, pools_compression=True, small_window_floor=True)


def as_host(monkeypatch, **facts: bool) -> None:
    """Run this test in a host that does ``facts`` (``hermes.host.Host``), and nothing else."""
    from tencentdb_offload.hermes import host
    monkeypatch.setattr(host, "_current", host.Host(**facts))


def assert_serial_for_default_port(port: int) -> None:
    """A test that holds the default port must run alone: runtimes in other workers use the
    default URL and would connect to it (and be counted, or hang)."""
    if port == DEFAULT_PORT and os.environ.get("PYTEST_XDIST_WORKER"):
        pytest.fail("127.0.0.1:%d held in a parallel worker: mark the test "
                    "@pytest.mark.default_port (tests/run.py runs those alone)" % port)


def wait_for(pred, timeout: float = 5.0, interval: float = 0.02) -> bool:
    """Poll ``pred`` until it is true or ``timeout`` seconds pass; its last answer."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(interval)
    return bool(pred())


class FullDisk:
    """The store's disk full for the runtime's writer: SQLite's own "database or disk is
    full" (its connection may not grow the file past its size now), until ``free`` deletes
    the ``ballast`` put in the file first, as an operator freeing space would; the writes
    held in memory meanwhile then land."""

    def __init__(self, rt: Any, ballast: int = 0) -> None:
        self.rt, self.full = rt, True
        with sqlite3.connect(str(rt.store.path)) as conn:
            conn.execute("CREATE TABLE IF NOT EXISTS ballast(b BLOB)")
            conn.execute("INSERT INTO ballast VALUES (zeroblob(?))", (ballast,))
        conn.close()

        def cap(c: sqlite3.Connection) -> None:
            c.execute("PRAGMA max_page_count=%d" % c.execute("PRAGMA page_count").fetchone()[0])
        rt.writer.submit(cap)
        assert rt.writer.flush(30), rt.writer.last_flush

    def free(self) -> None:
        with sqlite3.connect(str(self.rt.store.path)) as conn:
            conn.execute("DELETE FROM ballast")
        conn.close()
        self.rt.writer.submit(lambda c: c.execute("PRAGMA max_page_count=2147483646"))
        assert wait_for(lambda: self.rt.writer.flush(5), timeout=60), self.rt.writer.last_flush
        self.full = False


def env_for(tmp: Path, **overrides: str) -> Dict[str, str]:
    env = {"HERMES_HOME": str(tmp / "home"), "TENCENTDB_OFFLOAD_GATEWAY_URL": "off"}
    env.update({("TENCENTDB_OFFLOAD_" + k.upper()): str(v) for k, v in overrides.items()})
    return env


def make_engine(tmp: Path, context_length: int = 64_000, session: str = "s1", **overrides: str):
    runtime = plugin.build_runtime(env=env_for(tmp, **overrides))
    return runtime, plugin.open_session(runtime, session, context_length, model="m")


def tool_turn(i: int, size: int, shape: str = "openai", calls: int = 1,
              text: str = "x") -> List[Dict[str, Any]]:
    """A user turn followed by one assistant step with ``calls`` tool calls and results."""
    msgs: List[Dict[str, Any]] = [{"role": "user", "content": "turn %d: please do step %d" % (i, i)}]
    ids = ["call_%d_%d" % (i, k) for k in range(calls)]
    bodies = [("result %s " % cid) + (text * size) for cid in ids]
    if shape == "openai":
        msgs.append({"role": "assistant", "content": "",
                     "tool_calls": [{"id": cid, "type": "function",
                                     "function": {"name": "read_file",
                                                  "arguments": json.dumps({"path": "/f%s" % cid})}}
                                    for cid in ids]})
        for cid, body in zip(ids, bodies):
            msgs.append({"role": "tool", "tool_call_id": cid, "content": body})
    else:
        msgs.append({"role": "assistant", "content": [
            {"type": "text", "text": "reading"}] + [
            {"type": "tool_use", "id": cid, "name": "read_file", "input": {"path": "/f" + cid}}
            for cid in ids]})
        msgs.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": cid, "content": body}
            for cid, body in zip(ids, bodies)]})
    msgs.append({"role": "assistant", "content": "done with step %d" % i})
    return msgs


def conversation(turns: int, size: int, shape: str = "openai", calls: int = 1) -> List[Dict[str, Any]]:
    out: List[Dict[str, Any]] = []
    for i in range(turns):
        out += tool_turn(i, size, shape, calls)
    return out


def random_conversation(rng: random.Random) -> List[Dict[str, Any]]:
    """Random but valid: both shapes, parallel calls, huge results, CJK, heartbeats."""
    shape = rng.choice(["openai", "anthropic"])
    out: List[Dict[str, Any]] = []
    if rng.random() < 0.3:
        out.append({"role": "system", "content": "You are helpful."})
    n = 0
    for turn in range(rng.randint(1, 14)):
        prompt = rng.choice(["fix the bug", "修复这个错误并解释原因", "HEARTBEAT check", "write docs " * rng.randint(1, 400)])
        out.append({"role": "user", "content": "%s #%d" % (prompt, turn)})
        for step in range(rng.randint(0, 4)):
            calls = rng.randint(1, 3)
            ids = ["c%d" % (n + k) for k in range(calls)]
            n += calls
            heartbeat = rng.random() < 0.1
            args = {"path": "HEARTBEAT.md"} if heartbeat else {"path": "/src/%d.py" % n}
            size = rng.choice([10, 500, 3000, 20000, 200000])
            body = rng.choice(["abc ", "中文内容，", "def f(x):\n    return x\n", '{"k": [1,2]}'])
            bodies = [(body * (size // len(body) + 1))[:size] for _ in ids]
            if shape == "openai":
                out.append({"role": "assistant", "content": None if rng.random() < 0.5 else "ok",
                            "tool_calls": [{"id": i, "type": "function", "function": {
                                "name": "read_file", "arguments": json.dumps(args)}} for i in ids]})
                out += [{"role": "tool", "tool_call_id": i, "content": b} for i, b in zip(ids, bodies)]
            else:
                out.append({"role": "assistant", "content": [
                    {"type": "tool_use", "id": i, "name": "read_file", "input": args} for i in ids]})
                out.append({"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": i, "content": b} for i, b in zip(ids, bodies)]})
        if rng.random() < 0.8 or shape == "anthropic" or out[-1]["role"] == "user":
            out.append({"role": "assistant", "content": rng.choice(["done", "完成了", "x" * 5000])})
    return out


class _Captured(io.TextIOWrapper):
    """A UTF-8 text stream with bytes under it (``.buffer``), no descriptor and no terminal,
    as a pipe to a parent that captures the output looks to the command."""

    def __init__(self) -> None:
        super().__init__(io.BytesIO(), encoding="utf-8", errors="replace", write_through=True)

    def text(self) -> str:
        self.flush()
        return self.buffer.getvalue().decode("utf-8", "replace")      # type: ignore[attr-defined]


class Clock:
    """Wall and monotonic time a test moves for a runtime (``drive``); ``jump`` moves the wall
    clock only."""

    def __init__(self):
        # now-ish: the store's retention would drop a handover row from 1970
        self.wall, self.mono = time.time(), 50.0

    def drive(self, rt: Any) -> None:
        rt.now, rt.monotonic = (lambda: self.wall), (lambda: self.mono)

    def pause(self, seconds: float) -> None:
        self.wall += seconds
        self.mono += seconds

    def jump(self, seconds: float) -> None:
        self.wall += seconds


def store_with_events(directory: Path, rows: Sequence[Any]) -> None:
    """A store at ``directory`` holding ``rows`` (ts, session, kind, data) in its events table."""
    from tencentdb_offload.archive.store import Store
    Store(directory).close()
    conn = sqlite3.connect(str(directory / "store.db"))
    with conn:
        conn.executemany("INSERT INTO events(ts,session,kind,data) VALUES (?,?,?,?)",
                         [(ts, s, k, json.dumps(d)) for ts, s, k, d in rows])
    conn.close()


def cli_stdout(tmp_path: Path, *argv: str) -> str:
    """``python3 <plugin dir> ARGV`` with an empty Hermes home under ``tmp_path``: what it
    printed (it must exit 0)."""
    proc = run_cli(list(argv), env={"HERMES_HOME": str(tmp_path / "home")}, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def run_cli(argv: Sequence[str], env: Optional[Mapping[str, str]] = None,
            cwd: Optional[Path] = None) -> "subprocess.CompletedProcess[str]":
    """``python3 <plugin dir> ARGV`` in this process: ``ops.main(argv)`` with the caller's
    TENCENTDB_OFFLOAD_* and HERMES_* variables dropped and ``env`` set, in ``cwd``; what it
    prints captured. Returns what ``subprocess.run(..., capture_output=True, text=True)``
    would. The process state the command may change is put back after: the environment, the
    working directory, ``sys.path``, the standard streams and the loggers' handlers.

    Starting a Python per command cost most of the unit run; the few tests that prove the
    command works as a user runs it (``__main__``, exit codes, signals) start one."""
    from tencentdb_offload.ops import main

    out, err = _Captured(), _Captured()
    saved_env, saved_path = dict(os.environ), list(sys.path)
    loggers = [logging.getLogger(), logging.getLogger("tencentdb_offload")]
    saved_logging = [(lg, list(lg.handlers), lg.level) for lg in loggers]
    code: Any
    with pytest.MonkeyPatch.context() as mp:
        for name in list(os.environ):
            if name.startswith(("TENCENTDB_OFFLOAD_", "HERMES_")):
                mp.delenv(name)
        for name, value in (env or {}).items():
            mp.setenv(name, str(value))
        if cwd is not None:
            mp.chdir(cwd)
        mp.setattr(sys, "stdout", out)
        mp.setattr(sys, "stderr", err)
        try:
            code = main(list(argv))
        except SystemExit as exc:             # argparse's usage errors and --help
            code = exc.code
            if isinstance(code, str):         # sys.exit("words"): the words, status 1
                err.write(code + "\n")
                code = 1
            code = 0 if code is None else code
        finally:
            os.environ.clear()
            os.environ.update(saved_env)
            sys.path[:] = saved_path
            for lg, handlers, level in saved_logging:
                lg.handlers[:] = handlers
                lg.setLevel(level)
    return subprocess.CompletedProcess(list(argv), code, out.text(), err.text())


# -- a store filled the way the runtime's writer fills it (one transaction per call) ------------
def archive_items(store: Any, session: str, items: Sequence[Any]) -> None:
    """Archive ``items`` for ``session`` in ``store`` now, as one committed transaction."""
    if items:
        store.transaction([store.op_archive(session, list(items), time.time())])


def alias(store: Any, session_id: str, conversation: str) -> None:
    """Record ``session_id`` as a rotated id of ``conversation`` in ``store``."""
    from tencentdb_offload.archive.aliases import op_alias
    store.transaction([op_alias(session_id, conversation, time.time())])


def count_archived(store: Any, session: str) -> int:
    """How many archive rows ``store`` holds for ``session``."""
    return int(store._conn().execute("SELECT count(*) FROM archive WHERE session=?",
                                     (session,)).fetchone()[0])
