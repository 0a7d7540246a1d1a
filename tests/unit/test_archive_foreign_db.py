"""Another program's SQLite database with a table named ``archive`` (or ``events``) at
store.db: the read-only commands said "internal error: OperationalError: no such column";
now one line says it is not a store and what to do, exit 1, and the file is untouched."""

import sqlite3

import pytest

from test_cli import one_line_error, run_cli


@pytest.mark.parametrize("command", [["archive", "list"], ["archive", "search", "x"],
                                     ["archive", "show", "#1"], ["archive", "export", "s"],
                                     ["status"], ["outbox", "refused"], ["report"]])
def test_a_foreign_archive_table_is_named_not_a_bug(tmp_path, command):
    home = tmp_path / "home"
    store = home / "tencentdb-offload"
    store.mkdir(parents=True)
    conn = sqlite3.connect(str(store / "store.db"))
    conn.execute("CREATE TABLE archive(path TEXT, size INTEGER)")   # a backup tool's, say
    conn.execute("INSERT INTO archive VALUES ('/x', 1)")
    conn.commit()
    conn.close()
    before = (store / "store.db").read_bytes()
    proc = run_cli(*command, home=home)
    line = one_line_error(proc, "is not a tencentdb-offload store", "archive table lacks")
    assert "internal error" not in line
    assert (store / "store.db").read_bytes() == before
