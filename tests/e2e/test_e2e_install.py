"""The README's first screen, verbatim, against the real Hermes: the install block (install,
config, doctor) with a temporary HERMES_HOME and this checkout as the git URL and no Gateway
(doctor: exit 0, a "running local-only" warning), then the Gateway line, a session that uses
the engine, `hermes plugins list` and doctor passing with the Gateway."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402
from tests.fakes.gateway import FakeGateway  # noqa: E402
from tests.fakes.fake_llm import FakeLLM  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_GATEWAY = "http://127.0.0.1:8420"


def readme_blocks() -> list:
    """The bash blocks of the README's Install section: [install commands, Gateway line]."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text[text.index("## Install"):]
    section = section[:section.index("\n## ", 3)]
    blocks = [[line.strip() for line in b.splitlines() if line.strip() and not line.startswith("#")]
              for b in re.findall(r"```bash\n(.*?)```", section, re.S)]
    assert len(blocks) == 2 and blocks[0][0].startswith("hermes plugins install "), blocks
    return blocks


def with_url(command: str, url: str) -> str:
    """The install line with this test's repository URL in place of the README's."""
    line = command.split("  #")[0].strip()
    if line.startswith("hermes plugins install "):   # "<placeholder>" or a real URL
        return re.sub(r"<[^>]+>|\S+://\S+", url, line, count=1)
    return command


def git_snapshot(dest: Path) -> str:
    """This working tree as a one-commit git repository (what a user would clone)."""
    shutil.copytree(ROOT, dest, ignore=shutil.ignore_patterns(".git", "__pycache__", ".venv*", "*.pyc"))
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.invalid",
               GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.invalid")
    for cmd in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-q", "-m", "snapshot"]):
        subprocess.run(cmd, cwd=dest, env=env, check=True, capture_output=True)
    return dest.as_uri()


# Hermes 0.22's installer prepares a Python of its own through its package manager, which
# downloads it: on a host without network access (this sandbox) that step fails.
PM_OFFLINE = re.compile(r"python-build-standalone|download failed from", re.I)


def run(command: str, env: dict, cwd: Path, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(["bash", "-c", command], env=env, cwd=str(cwd), capture_output=True,
                          text=True, timeout=180, stdin=subprocess.DEVNULL)
    if check:
        assert proc.returncode == 0, "%s\n%s\n%s" % (command, proc.stdout[-3000:], proc.stderr[-2000:])
    return proc


def install_offline(url: str, home: Path, env: dict, cwd: Path) -> None:
    """The README's path (Troubleshooting) for a host where Hermes' package manager cannot
    download: clone into the plugins folder and list the plugin in ``plugins.enabled``."""
    run('git clone -q "%s" "%s"' % (url, home / "plugins" / "tencentdb-offload"), env, cwd)
    run("hermes config set plugins.enabled '[\"tencentdb-offload\"]'", env, cwd)


def run_install(commands: list, url: str, home: Path, env: dict, cwd: Path) -> list:
    outputs = []
    for command in commands:
        line = with_url(command, url)
        proc = run(line, env, cwd, check=False)
        offline = proc.returncode != 0 and line.startswith("hermes plugins install ") and \
            PM_OFFLINE.search(proc.stdout + proc.stderr)
        if offline:
            print("`hermes plugins install` needs network for Hermes' package manager on this "
                  "host; following the README's offline path instead")
            install_offline(url, home, env, cwd)
            continue
        assert proc.returncode == 0, "%s\n%s\n%s" % (line, proc.stdout[-3000:], proc.stderr[-2000:])
        outputs.append(proc)
    return outputs


def test_readme_install_then_session(tmp_path):
    held = socket.socket()            # the default Gateway port: bound, not listening = refused
    try:
        held.bind(("127.0.0.1", 8420))
    except OSError:
        held.close()
        pytest.skip("127.0.0.1:8420 is in use: the no-Gateway case cannot be shown")
    install, gateway_line = readme_blocks()
    with FakeLLM() as llm, FakeGateway() as gw:
        home = harness.make_home(tmp_path, llm.url, engine="compressor", enabled_plugins=())
        url = git_snapshot(tmp_path / "repo")
        env = harness._child_env(home, None)
        env["PATH"] = str(harness.hermes_bin().parent) + os.pathsep + env.get("PATH", "")
        try:
            outputs = run_install(install, url, home, env, tmp_path)
        finally:
            held.close()
        doctor = outputs[-1].stdout
        assert "doctor" in install[-1] and "all checks passed" in doctor, doctor
        assert re.search(r"^warn  gateway .*running local-only", doctor, re.M), doctor
        assert re.search(r"^pass  hermes .*from the hermes on PATH", doctor, re.M), doctor
        assert (home / "plugins" / "tencentdb-offload" / "plugin.yaml").is_file()

        for command in gateway_line:   # the README's Gateway stands in for this test's
            run(command.replace(DEFAULT_GATEWAY, gw.url), env, tmp_path)
        files = harness.make_text_files(tmp_path / "files", 1)
        conv = harness.Conversation(llm, home)
        conv.say("DO read " + str(files[0][0]))
        harness.assert_engine_used(conv)
        assert harness.wait_for(lambda: any(gw.ingested_pairs(s) for s in _sessions(gw)), 10), \
            "the installed plugin sent nothing to the Gateway named in .env"
        listed = run("hermes plugins list", env, tmp_path).stdout
        assert "tencentdb-offload" in listed, listed
        print("hermes plugins list:\n" + listed)
        after = harness.plugin_cli(home, "doctor")
        assert after.returncode == 0, after.stdout + after.stderr
        for check in ("install", "config", "settings", "gateway", "store"):
            assert any(line.split()[:2] == ["pass", check] for line in after.stdout.splitlines()), \
                (check, after.stdout)
        print("doctor:\n" + doctor + "\ndoctor with the Gateway:\n" + after.stdout)


def _sessions(gw):
    return {r.body.get("session_id") for r in list(gw.requests) if isinstance(r.body, dict)
            and r.body.get("session_id")}
