"""A store.db of 0 bytes (a kill or a full disk before its first page) is no store yet, as the
plugin itself reads it: every read-only command says "nothing yet" and exits 0, as with no
file; a directory where store.db belongs is named as one, not as a corrupt store."""

import pytest

from test_cli import one_line_error, run_cli

COMMANDS = [["archive", "list"], ["archive", "search", "x"], ["status"], ["outbox", "refused"],
            ["report"]]


def _store(tmp_path):
    home = tmp_path / "home"
    store = home / "tencentdb-offload"
    store.mkdir(parents=True)
    return home, store / "store.db"


@pytest.mark.parametrize("command", COMMANDS)
def test_an_empty_store_file_is_nothing_yet(tmp_path, command):
    home, db = _store(tmp_path)
    db.write_bytes(b"")
    proc = run_cli(*command, home=home)
    assert proc.returncode == 0, proc.stderr
    assert "not a tencentdb-offload store" not in proc.stdout + proc.stderr
    assert db.read_bytes() == b""


def test_doctor_reads_an_empty_store_file_as_no_store_yet(tmp_path):
    home, db = _store(tmp_path)
    db.write_bytes(b"")
    proc = run_cli("doctor", home=home)
    assert "no store yet" in proc.stdout, proc.stdout


@pytest.mark.parametrize("command", [["status"], ["archive", "list"], ["report"]])
def test_a_directory_at_store_db_is_named(tmp_path, command):
    home, db = _store(tmp_path)
    db.mkdir()
    line = one_line_error(run_cli(*command, home=home), "store.db")
    assert "directory" in line or "not a file" in line, line
    assert "corrupt" not in line
