"""``demo``/``replay --store PATH`` where PATH is a file (or a device): one line naming the
option. It said "cannot create PATH: [Errno 17] File exists: 'PATH' — recall tools are off
until this is fixed", the engine's words for a chat."""

from __future__ import annotations

import pytest

from test_cli import LOCAL, home, one_line_error, run_cli  # noqa: F401 (fixture)


@pytest.mark.parametrize("command", [["demo", "--turns", "1"], ["replay", "conversation.json"]])
def test_store_that_is_a_file_is_named(home, tmp_path, command):
    (home.parent / "conversation.json").write_text('[{"role": "user", "content": "hi"}, '
                                                   '{"role": "assistant", "content": "hello"}]')
    not_dir = tmp_path / "kept.txt"
    not_dir.write_text("mine")
    line = one_line_error(run_cli(*command, "--store", str(not_dir), home=home, env=LOCAL),
                          "--store", "not a directory")
    assert "Errno" not in line and "recall tools" not in line
    assert not_dir.read_text() == "mine"
