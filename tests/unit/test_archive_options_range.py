"""``archive show --offset/--limit`` and ``archive search --limit`` out of range: exit 2 naming the
option, as the docs promise for every option ("2 for an option out of range, naming the
option") and as ``status --recent 0`` does. They were clamped without a word: ``--offset -5``
printed from character 0, ``--limit 0`` one character, ``search --limit 500`` 200 results."""

from __future__ import annotations

import pytest

from test_cli import LOCAL, home, one_line_error, report_of, run_cli  # noqa: F401 (fixture)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    base = tmp_path_factory.mktemp("kept")
    (base / "home").mkdir()
    report_of(run_cli("demo", "--turns", "2", "--store", str(base / "kept"), "--json",
                      home=base / "home", env=LOCAL))
    return base / "kept"


@pytest.mark.parametrize("args, option", [
    (["show", "1", "--offset", "-5"], "--offset"),
    (["show", "1", "--limit", "0"], "--limit"),
    (["search", "retry", "--limit", "-1"], "--limit"),
    (["search", "retry", "--limit", "0"], "--limit"),
    (["search", "retry", "--limit", "500"], "--limit"),
])
def test_an_option_out_of_range_exits_2_naming_it(home, store, args, option):
    proc = run_cli("archive", *args, "--store", str(store), home=home, env=LOCAL)
    line = one_line_error(proc, option)
    assert proc.returncode == 2, line


def test_options_in_range_still_work(home, store):
    proc = run_cli("archive", "show", "1", "--offset", "0", "--limit", "1", "--store", str(store),
                   home=home, env=LOCAL)
    assert proc.returncode == 0, proc.stderr
    proc = run_cli("archive", "search", "retry", "--limit", "200", "--store", str(store),
                   home=home, env=LOCAL)
    assert proc.returncode == 0, proc.stderr



def test_a_limit_past_any_item_reads_it_whole(tmp_path):
    """`archive show ID --limit 99999999999999999999` said "internal error: OverflowError" on an
    ASCII item (read straight from the blob); any limit past the end reads to the end."""
    import sqlite3
    from tencentdb_offload.archive.lookup import page_of
    conn = sqlite3.connect(str(tmp_path / "a.db"))
    conn.execute("CREATE TABLE archive(content BLOB)")
    conn.execute("INSERT INTO archive(rowid, content) VALUES (1, ?)", (b"plain ascii text",))
    assert page_of(conn, 1, 16, 0, 10 ** 20) == "plain ascii text"
    assert page_of(conn, 1, 16, 6, 10 ** 20) == "ascii text"
