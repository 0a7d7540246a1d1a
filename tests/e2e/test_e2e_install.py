"""The README's install path, verbatim, against the real Hermes: the shell commands of the
first code block under "## Install" run with a temporary HERMES_HOME and this checkout as the
git URL, then a session must use the engine and the CLI's doctor must pass."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path


sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402
from tests.fakes.gateway import FakeGateway  # noqa: E402
from tests.fakes.fake_llm import FakeLLM  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
URL_PLACEHOLDER = "<git URL of this repository>"
DEFAULT_GATEWAY = "http://127.0.0.1:8420"


def readme_install_commands() -> list:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text[text.index("## Install"):]
    block = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    commands = [line.strip() for line in block.splitlines() if line.strip() and not line.startswith("#")]
    assert commands and commands[0].startswith("hermes plugins install " + URL_PLACEHOLDER), commands
    return commands


def git_snapshot(dest: Path) -> str:
    """This working tree as a one-commit git repository (what a user would clone)."""
    shutil.copytree(ROOT, dest, ignore=shutil.ignore_patterns(".git", "__pycache__", ".venv*", "*.pyc"))
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.invalid",
               GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.invalid")
    for cmd in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-q", "-m", "snapshot"]):
        subprocess.run(cmd, cwd=dest, env=env, check=True, capture_output=True)
    return dest.as_uri()


def test_readme_install_then_session(tmp_path):
    with FakeLLM() as llm, FakeGateway() as gw:
        home = harness.make_home(tmp_path, llm.url, engine="compressor", enabled_plugins=())
        url = git_snapshot(tmp_path / "repo")
        env = harness._child_env(home, None)
        env["PATH"] = str(harness.hermes_bin().parent) + os.pathsep + env.get("PATH", "")
        for command in readme_install_commands():
            # the repository and the Gateway of this test stand in for the README's
            command = command.replace(URL_PLACEHOLDER, url).replace(DEFAULT_GATEWAY, gw.url)
            proc = subprocess.run(["bash", "-c", command], env=env, cwd=str(tmp_path),
                                  capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL)
            assert proc.returncode == 0, "%s\n%s\n%s" % (command, proc.stdout[-2000:], proc.stderr[-2000:])
        assert (home / "plugins" / "tencentdb-offload" / "plugin.yaml").is_file()
        files = harness.make_text_files(tmp_path / "files", 1)
        conv = harness.Conversation(llm, home)
        conv.say("DO read " + str(files[0][0]))
        harness.assert_engine_used(conv)
        assert harness.wait_for(lambda: any(gw.ingested_pairs(s) for s in _sessions(gw)), 10), \
            "the installed plugin sent nothing to the Gateway named in .env"
        doctor = harness.plugin_cli(home, "doctor")
        assert doctor.returncode == 0, doctor.stdout + doctor.stderr
        for check in ("install", "config", "settings", "gateway", "store"):
            assert any(line.split()[:2] == ["pass", check] for line in doctor.stdout.splitlines()), \
                (check, doctor.stdout)


def _sessions(gw):
    return {r.body.get("session_id") for r in list(gw.requests) if isinstance(r.body, dict)
            and r.body.get("session_id")}
