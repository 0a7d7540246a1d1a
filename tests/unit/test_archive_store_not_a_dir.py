"""``archive … --store PATH`` where PATH is a file: the same one line as ``status`` ("the store
directory PATH is not a directory"), not "PATH/store.db is not a file: not a tencentdb-offload
store", which sends the user looking for a store.db."""

from __future__ import annotations

import pytest

from test_cli import one_line_error, run_cli


@pytest.mark.parametrize("action", [["list"], ["show", "1"], ["search", "retry"], ["export", "x"],
                                    ["forget", "x", "--yes"]])
def test_a_store_path_that_is_a_file(tmp_path, action):
    home = tmp_path / "home"
    home.mkdir()
    not_dir = tmp_path / "notes.txt"
    not_dir.write_text("mine")
    proc = run_cli("archive", *action, "--store", str(not_dir), home=home)
    line = one_line_error(proc, "the store directory %s is not a directory" % not_dir)
    assert proc.returncode == 1 and "store.db" not in line
    assert not_dir.read_text() == "mine"
