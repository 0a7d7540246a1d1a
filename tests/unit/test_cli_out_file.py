"""``report --out`` and ``archive export --out``: a FIFO or device (or a link to one) is written
through, never replaced by a regular file; a file replaced keeps its mode, a new one gets the
umask's; a missing folder or a directory is named without the file written beside it."""

from __future__ import annotations

import os
import stat
import threading
import time

import pytest

from tencentdb_offload.archive.store import ArchiveItem, Store

from test_cli import run_cli
from helpers import archive_items


@pytest.fixture(scope="module")
def kept(tmp_path_factory):
    """A store with one conversation that has an archived item and a compaction."""
    tmp = tmp_path_factory.mktemp("outfile")
    st = Store(tmp / "store")
    archive_items(st, "conv-1", [ArchiveItem("tool_result", "alpha " * 50, "c1", "grep")])
    st.transaction([Store.op_event("conv-1", "compaction", {
        "path": "local", "level": "", "tokens_before": 900, "tokens_after": 400, "archived": 1},
        time.time())])
    st.close()
    return tmp / "store", tmp / "home"


def _reader(path):
    """Read a FIFO in the background; the bytes land in the returned list."""
    got = []
    t = threading.Thread(target=lambda: got.append(open(path, "rb").read()), daemon=True)
    t.start()
    return t, got


COMMANDS = {"export": ("archive", "export", "conv-1", "--out"), "report": ("report", "--out")}


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("via_link", [False, True])
def test_a_fifo_or_a_link_to_one_is_written_through_not_replaced(kept, tmp_path, command, via_link):
    store, home = kept
    fifo = tmp_path / "pipe"
    os.mkfifo(str(fifo))
    out = fifo
    if via_link:
        out = tmp_path / "link"
        out.symlink_to(fifo)
    t, got = _reader(fifo)
    proc = run_cli(*COMMANDS[command], str(out), "--store", str(store), home=home)
    t.join(10)
    assert proc.returncode == 0, proc.stderr
    assert stat.S_ISFIFO(os.stat(str(out)).st_mode), "the FIFO was replaced by a regular file"
    assert via_link == os.path.islink(str(out))
    assert got and (b"conv-1" in got[0])
    assert sorted(os.listdir(tmp_path)) == sorted({"pipe", out.name})   # nothing left beside it


def _umask() -> int:
    old = os.umask(0)
    os.umask(old)
    return old


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_new_file_gets_the_umask_and_a_replaced_one_keeps_its_mode(kept, tmp_path, command):
    store, home = kept
    out = tmp_path / "out.txt"
    proc = run_cli(*COMMANDS[command], str(out), "--store", str(store), home=home)
    assert proc.returncode == 0, proc.stderr
    assert stat.S_IMODE(out.stat().st_mode) == 0o666 & ~_umask()
    out.chmod(0o640)
    proc = run_cli(*COMMANDS[command], str(out), "--store", str(store), home=home)
    assert proc.returncode == 0, proc.stderr
    assert stat.S_IMODE(out.stat().st_mode) == 0o640 and "conv-1" in out.read_text()


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_missing_folder_or_a_directory_is_named_without_the_partial_file(kept, tmp_path, command):
    store, home = kept
    missing = run_cli(*COMMANDS[command], str(tmp_path / "nowhere" / "x"), "--store", str(store),
                      home=home)
    assert missing.returncode == 1 and "the folder %s does not exist" % (tmp_path / "nowhere") \
        in missing.stderr, missing.stderr
    folder = run_cli(*COMMANDS[command], str(tmp_path), "--store", str(store), home=home)
    assert folder.returncode == 1 and "is a directory" in folder.stderr, folder.stderr
    for proc in (missing, folder):
        assert "partial" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert os.listdir(tmp_path) == []
