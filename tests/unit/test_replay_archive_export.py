"""``replay`` given what ``archive export`` wrote says it is an archive export (one line, exit 1)
instead of replaying tool results that answer no call ("INVALID", "81 of 80")."""

import json

from test_cli import one_line_error, run_cli


def test_replay_recognises_an_archive_export(tmp_path):
    home, store = tmp_path / "home", tmp_path / "store"
    assert run_cli("demo", "--turns", "4", "--store", str(store), "--json", home=home).returncode == 0
    listed = run_cli("archive", "list", "--store", str(store), "--json", home=home)
    session = json.loads(listed.stdout)[0]["session"]
    out = tmp_path / "export.jsonl"
    exported = run_cli("archive", "export", session, "--out", str(out), "--store", str(store), home=home)
    assert exported.returncode == 0, exported.stderr
    proc = run_cli("replay", str(out), home=home)
    line = one_line_error(proc, "archive export", "cannot be replayed")
    assert "INVALID" not in proc.stdout + line
