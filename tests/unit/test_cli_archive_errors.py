"""``archive``, ``outbox`` and ``status`` on a store that is busy, read-only, broken, oddly named
or asked for what it does not hold: one clear line and exit 1, never an internal error or a
success that hides the problem."""

from __future__ import annotations

import json
import shutil
import sqlite3

import pytest

from fakes import lcm_store
from tencentdb_offload.archive import browse, refused
from tencentdb_offload.archive.store import ArchiveItem, Store

from test_cli import one_line_error, run_cli
from helpers import archive_items


@pytest.fixture(scope="module")
def kept(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("archive")
    st = Store(tmp / "store")
    archive_items(st, "conv-1", [ArchiveItem("tool_result", "alpha " * 50, "c1", "grep")])
    st.close()
    return tmp / "store", tmp / "home"


def test_a_busy_store_is_a_browse_error_that_says_try_again(kept, tmp_path):
    store = tmp_path / "store"
    shutil.copytree(str(kept[0]), str(store))
    holder = sqlite3.connect(str(store / "store.db"), isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        for write in (lambda: browse.forget(store, "conv-1", timeout=0.1),
                      lambda: refused.requeue(store, None, timeout=0.1)):
            with pytest.raises(browse.BrowseError, match="is busy .*; try again"):
                write()
    finally:
        holder.close()


def test_a_read_only_store_says_it_cannot_be_written(tmp_path):
    exc = sqlite3.OperationalError("attempt to write a readonly database")
    assert str(browse.write_problem(exc, tmp_path)).startswith("cannot write %s: " % tmp_path)


@pytest.mark.parametrize("broken", ["directory", "garbage"])
def test_search_in_a_broken_store_fails_instead_of_finding_nothing(tmp_path, broken):
    store = tmp_path / "store"
    store.mkdir()
    if broken == "directory":
        (store / "store.db").mkdir()
    else:
        (store / "store.db").write_bytes(b"not a database" * 100)
    proc = run_cli("archive", "search", "x", "--store", str(store), home=tmp_path / "home")
    one_line_error(proc, "store.db")
    assert "no archived item" not in proc.stdout


def test_search_in_a_broken_store_still_prints_what_lcm_history_finds(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    lcm_store.build(home / "lcm.db")
    (home / "tencentdb-offload").mkdir()
    (home / "tencentdb-offload" / "store.db").write_bytes(b"not a database" * 100)
    proc = run_cli("archive", "search", lcm_store.UNIQUE_WORD, home=home)
    assert proc.returncode == 0 and "hermes-lcm history" in proc.stdout, proc.stderr
    assert "store.db" in proc.stderr


@pytest.mark.parametrize("name", ["bad\udcffdir", "a b?c#d%e"])
def test_a_store_path_of_any_bytes_is_read(kept, tmp_path, name):
    store = tmp_path / name
    shutil.copytree(str(kept[0]), str(store))
    for args in (("archive", "list"), ("status",)):
        proc = run_cli(*args, "--store", str(store), home=kept[1])
        assert proc.returncode == 0, proc.stderr
    listed = run_cli("archive", "list", "--json", "--store", str(store), home=kept[1])
    assert json.loads(listed.stdout)[0]["session"] == "conv-1"


def test_forget_of_a_conversation_with_nothing_stored_fails(kept):
    store, home = kept
    for extra in ((), ("--yes",)):
        proc = run_cli("archive", "forget", "nosuch", *extra, "--store", str(store), home=home)
        one_line_error(proc, "nothing archived in nosuch")
        assert "removed" not in proc.stdout


def test_forget_dry_run_prints_json_and_exits_0(kept):
    """A dry run did what it was asked (exit 1 read as a failure in scripts); it says on
    stderr that nothing was deleted."""
    store, home = kept
    proc = run_cli("archive", "forget", "conv-1", "--json", "--store", str(store), home=home)
    assert proc.returncode == 0 and "without --yes" in proc.stderr
    assert json.loads(proc.stdout) == {"would_remove": {"archive": 1, "outbox": 0, "outbox_leases": 0,
                                                        "events": 0, "handover": 0, "aliases": 0}}


def test_show_a_huge_row_number_or_an_offset_past_the_end(kept):
    store, home = kept
    huge = run_cli("archive", "show", "#99999999999999999999999", "--store", str(store), home=home)
    one_line_error(huge, "nothing archived under")
    past = run_cli("archive", "show", "#1", "--offset", "20000", "--store", str(store), home=home)
    one_line_error(past, "--offset 20000 is past the end of #1")
    assert past.stdout == ""


def test_status_on_a_store_directory_that_is_a_file(tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("x")
    proc = run_cli("status", "--store", str(afile), home=tmp_path / "home")
    one_line_error(proc, "is not a directory")


@pytest.mark.parametrize("words", ["", "   "])
def test_search_without_words_says_what_to_do(tmp_path, words):
    store = tmp_path / "store"
    store.mkdir()
    proc = run_cli("archive", "search", words, "--store", str(store), home=tmp_path / "home")
    one_line_error(proc, "give a word to search for")
