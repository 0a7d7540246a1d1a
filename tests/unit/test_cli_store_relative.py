"""`--store ./kept-demo` (the README's own example) is a directory relative to where the command
runs, not the TENCENTDB_OFFLOAD_STORE_DIR setting: no "relative path" warning naming a setting
the user never set, and doctor does not fail its settings check over it."""

from __future__ import annotations

from pathlib import Path

from helpers import run_cli


def run(*args: str, cwd: Path, home: Path):
    return run_cli(args, env={"HERMES_HOME": str(home), "TENCENTDB_OFFLOAD_GATEWAY_URL": "off",
                              "PATH": ""}, cwd=cwd)


def test_relative_store_option_is_not_a_relative_store_setting(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    demo = run("demo", "--turns", "2", "--store", "./kept-demo", cwd=tmp_path, home=home)
    assert demo.returncode == 0, demo.stderr
    for command in (["status"], ["archive", "list"], ["outbox", "refused"],
                    ["report", "--out", "page.html"], ["doctor", "--timeout", "0.5"]):
        proc = run(*command, "--store", "./kept-demo", cwd=tmp_path, home=home)
        out = proc.stdout + proc.stderr
        assert "relative path" not in out, (command, out)
        assert "STORE_DIR='./kept-demo'" not in out, (command, out)
        if command[0] != "doctor":      # doctor: no plugin install or Hermes here, other checks fail
            assert proc.returncode == 0, (command, out)
        else:
            assert "fail  settings" not in out, out
    status = run("status", "--store", "./kept-demo", cwd=tmp_path, home=home)
    assert "demo-7-" in status.stdout, status.stdout


def test_status_of_a_store_not_there_yet_names_the_store_given(tmp_path):
    """`status --store ./kept-demo` before the demo kept it named HERMES_HOME and
    TENCENTDB_OFFLOAD_STORE_DIR, which the user did not use."""
    home = tmp_path / "home"
    home.mkdir()
    status = run("status", "--store", "./kept-demo", cwd=tmp_path, home=home)
    assert status.returncode == 0, status.stderr
    assert "no store at %s (the --store given)" % (tmp_path / "kept-demo") in status.stdout, status.stdout
    assert "TENCENTDB_OFFLOAD_STORE_DIR" not in status.stdout, status.stdout
