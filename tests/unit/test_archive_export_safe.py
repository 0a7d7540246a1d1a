"""``archive export --out FILE`` never destroys a file (issue 27 item 5): a conversation that
does not exist leaves the user's file as it was, and an output path that is, or links into,
the store leaves the archive whole."""

import json
import os

import pytest

from test_cli import run_cli


@pytest.fixture(scope="module")
def kept(tmp_path_factory):
    """A small demo's store and the name of its one conversation."""
    tmp = tmp_path_factory.mktemp("export")
    store = tmp / "store"
    demo = run_cli("demo", "--turns", "4", "--store", str(store), home=tmp / "home")
    assert demo.returncode == 0, demo.stderr
    listed = run_cli("archive", "list", "--store", str(store), "--json", home=tmp / "home")
    return store, json.loads(listed.stdout)[0]["session"], tmp / "home"


def _items(store, home):
    listed = run_cli("archive", "list", "--store", str(store), "--json", home=home)
    return json.loads(listed.stdout)[0]["items"]


def test_a_misspelt_conversation_leaves_the_users_file_untouched(kept, tmp_path):
    store, _session, home = kept
    mine = tmp_path / "notes.txt"
    mine.write_text("the user's own words\n")
    proc = run_cli("archive", "export", "no-such-conversation", "--out", str(mine),
                   "--store", str(store), home=home)
    assert proc.returncode == 1 and "nothing archived in no-such-conversation" in proc.stderr
    assert mine.read_text() == "the user's own words\n"
    assert sorted(os.listdir(tmp_path)) == ["notes.txt"]       # no partial file left behind


def test_an_output_that_links_to_the_store_leaves_the_archive_whole(kept, tmp_path):
    store, session, home = kept
    before = _items(store, home)
    link = tmp_path / "export.jsonl"
    link.symlink_to(store / "store.db")
    proc = run_cli("archive", "export", session, "--out", str(link), "--store", str(store), home=home)
    assert proc.returncode == 1 and "inside the store" in proc.stderr, proc.stderr
    inside = run_cli("archive", "export", session, "--out", str(store / "x.jsonl"),
                     "--store", str(store), home=home)
    assert inside.returncode == 1 and not (store / "x.jsonl").exists()
    assert _items(store, home) == before > 0


def test_an_export_replaces_the_file_only_when_whole(kept, tmp_path):
    store, session, home = kept
    out = tmp_path / "conversation.jsonl"
    out.write_text("old\n")
    proc = run_cli("archive", "export", session, "--out", str(out), "--store", str(store), home=home)
    assert proc.returncode == 0, proc.stderr
    lines = out.read_text().splitlines()
    assert len(lines) == _items(store, home) and all(json.loads(x)["session"] for x in lines)
