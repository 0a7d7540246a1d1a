"""A state.db given as ``replay``'s SOURCE (one copied from a server): it is read as
``$HERMES_HOME/state.db`` is, with ``--session ID``; it used to fail as a text file that is
not UTF-8 ("'utf-8' codec can't decode byte …")."""

from __future__ import annotations

from test_cli import LOCAL, _mini_state_db, home, one_line_error, report_of, run_cli  # noqa: F401

SID = "20260101_000000_abcdef"


def test_a_state_db_file_replays_the_session_named(home, tmp_path):
    copied = tmp_path / "server" / "state.db"
    copied.parent.mkdir()
    msgs = _mini_state_db(copied, with_active=True)
    before = copied.read_bytes()
    rep = report_of(run_cli("replay", str(copied), "--session", SID, "--context-length", "64000",
                            "--json", home=home, env=LOCAL))
    assert rep["source"]["kind"] == "hermes-session"
    assert rep["summary"]["messages_read"] == len(msgs)
    assert copied.read_bytes() == before
    assert not (home / "state.db").exists()


def test_a_state_db_file_without_a_session_asks_for_one(home, tmp_path):
    copied = tmp_path / "state.db"
    _mini_state_db(copied, with_active=False)
    line = one_line_error(run_cli("replay", str(copied), home=home, env=LOCAL), "--session ID")
    assert "codec" not in line
    one_line_error(run_cli("replay", str(copied), "--session", "20991231_nope", home=home, env=LOCAL),
                   "no session")
