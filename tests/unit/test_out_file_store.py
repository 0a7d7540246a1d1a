"""Every file the command line writes goes through one writer that never writes into the store
(issue 51 item 3): ``report --out`` pointed at ``store.db`` (or a link to it) replaced the
database with a 7 KB page, and every archive command then said "file is not a database".
Each surface is refused for the store's files, their -wal/-shm, any name in the store's folder,
a symbolic link to one, a link to the folder, and a hard link to ``store.db``; the store stays
byte for byte as it was and readable."""

from __future__ import annotations

import hashlib
import os
import time

import pytest

from tencentdb_offload.archive.store import ArchiveItem, Store
from tencentdb_offload.ops.env import CliError
from tencentdb_offload.ops.out_file import write_out

from test_cli import run_cli
from helpers import archive_items

COMMANDS = {"export": ("archive", "export", "conv-1", "--out"), "report": ("report", "--out")}


@pytest.fixture
def kept(tmp_path):
    """A store with one conversation (an archived item and a compaction), and its WAL kept."""
    st = Store(tmp_path / "store")
    archive_items(st, "conv-1", [ArchiveItem("tool_result", "alpha " * 50, "c1", "grep")])
    st.transaction([Store.op_event("conv-1", "compaction", {
        "path": "local", "level": "", "tokens_before": 900, "tokens_after": 400, "archived": 1},
        time.time())])
    st.close()
    store = tmp_path / "store"
    for suffix in ("-wal", "-shm"):     # as a running plugin keeps them beside store.db
        (store / ("store.db" + suffix)).touch()
    return store, tmp_path / "home"


def _fingerprint(store):
    return {p.name: (hashlib.sha256(p.read_bytes()).hexdigest(), os.stat(str(p)).st_ino)
            for p in sorted(store.iterdir()) if p.is_file()}


def _outs(store, tmp_path):
    """Each way of naming the store: (label, path given to --out)."""
    sym = tmp_path / "page.html"
    sym.symlink_to(store / "store.db")
    hard = tmp_path / "hard.html"
    os.link(str(store / "store.db"), str(hard))
    folder = tmp_path / "store-link"
    folder.symlink_to(store, target_is_directory=True)
    return [("store.db", store / "store.db"), ("wal", store / "store.db-wal"),
            ("shm", store / "store.db-shm"), ("new name in the store", store / "page.html"),
            ("symlink to store.db", sym), ("hard link to store.db", hard),
            ("through a link to the folder", folder / "store.db"),
            ("new name through the folder link", folder / "x.html")]


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_no_surface_writes_into_the_store(kept, tmp_path, command):
    store, home = kept
    before = _fingerprint(store)
    for label, out in _outs(store, tmp_path):
        proc = run_cli(*COMMANDS[command], str(out), "--store", str(store), home=home)
        assert proc.returncode == 1, (label, proc.stdout, proc.stderr)
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and "refusing to write" in lines[0] and "store" in lines[0], \
            (label, proc.stderr)
        assert _fingerprint(store) == before, label
    assert (tmp_path / "hard.html").stat().st_ino == before["store.db"][1]  # the link kept
    listed = run_cli("archive", "list", "--store", str(store), home=home)
    assert listed.returncode == 0 and "conv-1" in listed.stdout, listed.stderr


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_beside_the_store_is_still_written(kept, tmp_path, command):
    store, home = kept
    out = tmp_path / "store.db"         # the same name, outside the store's folder
    proc = run_cli(*COMMANDS[command], str(out), "--store", str(store), home=home)
    assert proc.returncode == 0, proc.stderr
    assert "conv-1" in out.read_text(encoding="utf-8")


def test_an_interrupted_fill_leaves_the_file_and_no_partial(tmp_path):
    mine = tmp_path / "notes.txt"
    mine.write_text("the user's own words\n")

    def half(out):
        out.write("x" * 100_000)
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_out(mine, half, [tmp_path / "store"])
    assert mine.read_text() == "the user's own words\n" and os.listdir(str(tmp_path)) == ["notes.txt"]


def test_the_writer_refuses_before_calling_fill(kept):
    store, _home = kept
    called = []
    with pytest.raises(CliError):
        write_out(store / "store.db", lambda out: called.append(1), [store])
    assert called == []


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_no_surface_replaces_a_database_outside_the_store(kept, tmp_path, command):
    """Hermes' state.db or hermes-lcm's lcm.db (or a copy of the store) is no place for a page."""
    store, home = kept
    copy = tmp_path / "state.db"
    copy.write_bytes((store / "store.db").read_bytes())
    before = copy.read_bytes()
    proc = run_cli(*COMMANDS[command], str(copy), "--store", str(store), home=home)
    assert proc.returncode == 1 and "SQLite database" in proc.stderr, proc.stderr
    assert copy.read_bytes() == before


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_the_configured_store_is_refused_while_another_is_read(kept, tmp_path, command):
    """``--store`` names a kept copy; the plugin's own store (HERMES_HOME's) is still not written."""
    store, home = kept
    live = home / "tencentdb-offload"
    Store(live).close()
    before = _fingerprint(live)
    proc = run_cli(*COMMANDS[command], str(live / "store.db-wal"), "--store", str(store), home=home)
    assert proc.returncode == 1 and "inside the store" in proc.stderr, proc.stderr
    assert _fingerprint(live) == before
