"""HERMES_HOME naming a file: doctor said it "does not exist" (it does; it is a file), which
sends the operator looking for a missing directory instead of the stray file."""

from test_cli import run_cli


def test_a_hermes_home_that_is_a_file_is_called_so(tmp_path):
    home = tmp_path / "home"
    home.write_text("not a directory")
    proc = run_cli("doctor", "--timeout", "1", home=home)
    assert proc.returncode == 1
    assert "is not a directory" in proc.stderr and "does not exist" not in proc.stderr, proc.stderr
