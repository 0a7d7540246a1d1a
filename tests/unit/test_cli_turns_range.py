"""``demo --turns 2000`` exited 1 (a run-time error) while docs/commands.md promises exit 2
naming the option for an option out of range, as ``--turns 0`` already did."""

from test_cli import one_line_error, run_cli


def test_turns_above_the_cap_is_an_option_error(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    proc = run_cli("demo", "--turns", "2000", home=home)
    assert proc.returncode == 2, proc.stderr
    one_line_error(proc, "--turns", "at most 1000")
    assert not proc.stdout
