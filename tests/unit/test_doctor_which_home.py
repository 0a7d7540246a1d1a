"""Which Hermes home doctor checks, and why. With ``HERMES_HOME`` unset, ``python3 <the copy
installed in another home> doctor`` checked ``~/.hermes`` and printed "all checks passed",
never saying which home it had checked nor that the copy running was not the one that home
loads."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tencentdb_offload.ops import main

ROOT = Path(__file__).resolve().parents[2]
CONFIG = "context:\n  engine: tencentdb-offload\nplugins:\n  enabled: [tencentdb-offload]\n"


def make_home(home: Path) -> Path:
    """A Hermes home with the plugin installed (its manifest and entry point: what doctor reads)."""
    copy = home / "plugins" / "tencentdb-offload"
    copy.mkdir(parents=True)
    for name in ("plugin.yaml", "__init__.py"):
        shutil.copy2(ROOT / name, copy / name)
    (home / "config.yaml").write_text(CONFIG)
    (home / ".env").write_text("TENCENTDB_OFFLOAD_GATEWAY_URL=off\n")
    return copy


def doctor(monkeypatch, capsys, plugin_dir: Path, **env: str) -> dict:
    for name in ("HERMES_HOME", "HERMES_ENABLE_PROJECT_PLUGINS"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    main(["doctor", "--json", "--timeout", "0.5"], plugin_dir=str(plugin_dir))
    return json.loads(capsys.readouterr().out)


def home_rows(report: dict) -> list:
    return [c for c in report["checks"] if c["name"] == "home"]


def test_a_copy_from_another_home_says_which_home_it_checked(tmp_path, monkeypatch, capsys):
    user = tmp_path / "user"
    default = user / ".hermes"
    make_home(default)
    other = tmp_path / "work-profile"
    theirs = make_home(other)
    monkeypatch.chdir(tmp_path)
    report = doctor(monkeypatch, capsys, theirs, HOME=str(user))
    rows = home_rows(report)
    assert rows[0]["status"] == "pass" and str(default) in rows[0]["message"]
    assert "HERMES_HOME is not set" in rows[0]["message"], rows
    warned = [r for r in rows if r["status"] == "warn"]
    assert len(warned) == 1 and str(theirs) in warned[0]["message"] and str(other) in warned[0]["message"]
    assert warned[0]["fix"].startswith("HERMES_HOME=%s python3 %s doctor" % (other, theirs))
    assert report["summary"] != "all checks passed"


def test_the_homes_own_copy_checks_quietly_and_says_why(tmp_path, monkeypatch, capsys):
    home = tmp_path / "profile"
    copy = make_home(home)
    monkeypatch.chdir(tmp_path)
    report = doctor(monkeypatch, capsys, copy, HERMES_HOME=str(home))
    rows = home_rows(report)
    assert [r["status"] for r in rows] == ["pass"], rows
    assert rows[0]["message"] == "checking the Hermes home %s (HERMES_HOME=%s)" % (home, home)


def test_a_clone_outside_any_home_is_not_taken_for_another_homes_copy(tmp_path, monkeypatch, capsys):
    home = tmp_path / "profile"
    make_home(home)
    clone = tmp_path / "src" / "plugins" / "tencentdb-offload"      # a "plugins" folder, no home
    clone.mkdir(parents=True)
    shutil.copy2(ROOT / "plugin.yaml", clone / "plugin.yaml")
    monkeypatch.chdir(tmp_path)
    report = doctor(monkeypatch, capsys, clone, HERMES_HOME=str(home))
    assert [r["status"] for r in home_rows(report)] == ["pass"]
