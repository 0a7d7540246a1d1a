"""The operator's own output cannot be written (``> FILE`` on a full disk, ``>&-``) or the
demo's temporary store cannot be made: one line naming the cause, exit 1, never "internal
error" (which says "a bug: run with TDO_DEBUG=1")."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _run(home: Path, *args: str, stdout=subprocess.PIPE, fsize: int = -1, closed=False):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TENCENTDB_OFFLOAD_", "HERMES_"))}
    env.update(HERMES_HOME=str(home), PYTHONDONTWRITEBYTECODE="1", PYTHONIOENCODING="utf-8")

    def limit():
        if closed:
            os.close(1)
        if fsize >= 0:      # a "full disk" for the child only
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, resource.RLIM_INFINITY))
    return subprocess.run([sys.executable, str(ROOT)] + list(args), stdout=stdout,
                          stderr=subprocess.PIPE, text=True, env=env, timeout=120,
                          cwd=str(home.parent), preexec_fn=limit)


def _one_line(proc, *needles: str) -> str:
    assert proc.returncode == 1, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "internal error" not in lines[0], proc.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full here")
@pytest.mark.parametrize("command", [["status"], ["status", "--json"], ["archive", "list"],
                                     ["outbox", "refused"], ["doctor"]])
def test_stdout_on_a_full_disk_is_named_not_a_bug(tmp_path, command):
    home = tmp_path / "home"
    home.mkdir()
    with open("/dev/full", "w") as full:
        proc = _run(home, *command, stdout=full)
    _one_line(proc, "cannot write standard output", "No space left on device")


def test_stdout_past_the_file_size_limit_is_named(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    with open(tmp_path / "out.txt", "w") as out:
        proc = _run(home, "status", stdout=out, fsize=100)
    _one_line(proc, "cannot write standard output", "File too large")


def test_stdout_closed_is_named(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    proc = _run(home, "status", stdout=None, closed=True)      # as ``status >&-``
    _one_line(proc, "cannot write standard output", "closed")


def test_demo_without_room_for_its_temporary_store_says_so(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    proc = _run(home, "demo", "--turns", "3", fsize=0)
    _one_line(proc, "cannot create a temporary store", "--store DIR")


def _reader_gone(home: Path, *args: str):
    """As ``COMMAND | head -1`` once head has left: every write to stdout breaks the pipe."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return _run(home, *args, stdout=write_end)
    finally:
        os.close(write_end)


def test_a_reader_that_left_keeps_doctors_failure(tmp_path):
    # ``set -o pipefail; doctor | head -1`` must still fail when a check failed
    proc = _reader_gone(tmp_path / "no-such-home", "doctor")
    assert proc.returncode == 1, proc.stderr
    assert "check(s) failed" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert "Exception ignored" not in proc.stderr, proc.stderr


def test_a_reader_that_left_is_not_a_failure(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    proc = _reader_gone(home, "status")
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
