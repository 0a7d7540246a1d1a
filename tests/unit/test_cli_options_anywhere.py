"""``--store DIR`` and ``--json`` work where users type them: before or after an archive action,
and on every command that reads a store; an archive with no store yet is a state (exit 0, says
nothing is archived yet), as ``status`` treats it."""

import json

import pytest

from test_cli import run_cli


@pytest.mark.parametrize("argv", [
    ["archive", "list", "--store", "{store}", "--json"],
    ["archive", "--store", "{store}", "list", "--json"],
    ["archive", "--json", "list", "--store", "{store}"],
    ["archive", "search", "retry", "--json", "--store", "{store}"],
    ["outbox", "refused", "--store", "{store}", "--json"],
    ["outbox", "--json", "refused", "--store", "{store}"],
])
def test_archive_takes_store_and_json_before_or_after_the_action(argv, tmp_path):
    store = tmp_path / "no-store-yet"
    proc = run_cli(*[a.format(store=store) for a in argv], home=tmp_path / "home")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == []
    assert not store.exists()            # reading never creates a store


def test_outbox_without_a_store_has_nothing_refused_and_creates_nothing(tmp_path):
    store = tmp_path / "s"
    for action in ("refused", "requeue"):
        proc = run_cli("outbox", action, "--store", str(store), home=tmp_path / "home")
        assert proc.returncode == 0, proc.stderr
        assert "nothing refused" in proc.stdout
    assert not store.exists()


def test_archive_list_without_a_store_says_nothing_is_archived_yet(tmp_path):
    proc = run_cli("archive", "list", "--store", str(tmp_path / "s"), home=tmp_path / "home")
    assert proc.returncode == 0, proc.stderr
    assert "nothing archived yet" in proc.stdout


def test_an_option_given_before_the_action_is_not_reset_after_it(tmp_path):
    demo = run_cli("demo", "--turns", "4", "--store", str(tmp_path / "kept"), "--json",
                   home=tmp_path / "home")
    assert demo.returncode == 0, demo.stderr
    proc = run_cli("archive", "--store", str(tmp_path / "kept"), "--json", "list",
                   home=tmp_path / "home")
    assert proc.returncode == 0, proc.stderr
    assert len(json.loads(proc.stdout)) == 1


@pytest.mark.parametrize("command", ["status", "doctor"])
def test_every_store_reading_command_takes_store_and_json(command, tmp_path):
    store = tmp_path / "elsewhere"
    proc = run_cli(command, "--store", str(store), "--json", home=tmp_path / "home")
    assert proc.stdout.strip().startswith("{"), proc.stderr
    assert str(store) in proc.stdout
