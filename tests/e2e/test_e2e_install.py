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


def doc_text() -> str:
    """The README, whose Install, Verify, Update and Uninstall text these tests run."""
    return (ROOT / "README.md").read_text(encoding="utf-8")


def section_blocks(name: str) -> list:
    """The bash blocks of one ``## name`` section, as lists of command lines."""
    text = doc_text()
    section = text[text.index("## " + name):]
    end = section.find("\n## ", 3)
    section = section if end < 0 else section[:end]
    return [[line.strip() for line in b.splitlines() if line.strip() and not line.startswith("#")]
            for b in re.findall(r"```bash\n(.*?)```", section, re.S)]


def readme_blocks() -> list:
    """The Install section: [install commands, the clone path without network, Gateway line]."""
    blocks = section_blocks("Install")
    assert len(blocks) == 3 and blocks[0][0].startswith("hermes plugins install "), blocks
    assert blocks[1][0].startswith("git clone "), blocks
    return blocks


def with_url(command: str, url: str) -> str:
    """The install or clone line with this test's repository URL in place of the README's."""
    line = command.split("  #")[0].strip()
    if line.startswith(("hermes plugins install ", "git clone ")):   # "<placeholder>" or a URL
        return re.sub(r"<[^>]+>|\S+://\S+", url, line, count=1)
    return line


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


def install_offline(url: str, env: dict, cwd: Path) -> None:
    """The README's path for a host where Hermes' package manager cannot download: the
    Install section's second block, as written."""
    for command in readme_blocks()[1]:
        run(with_url(command, url), env, cwd)


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
            install_offline(url, env, cwd)
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
    install, _offline, gateway_line = readme_blocks()
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
        assert "doctor" in install[-1] and doctor.rstrip().splitlines()[-1] == "passed with 1 warning", doctor
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


def commit_change(repo: Path) -> str:
    """A new commit upstream: the marker an update must bring."""
    marker = "update-marker-%d" % os.getpid()
    (repo / "UPDATE_MARKER").write_text(marker)
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.invalid",
               GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.invalid")
    for cmd in (["git", "add", "-A"], ["git", "commit", "-q", "-m", "update"]):
        subprocess.run(cmd, cwd=repo, env=env, check=True, capture_output=True)
    return marker


def run_first_that_works(blocks: list, env: dict, cwd: Path) -> str:
    """The README's main block; when one of its commands refuses, the block it names for that
    case (as written: its placeholder comment keeps no other plugin)."""
    for command in blocks[0]:
        proc = run(command.split("  #")[0], env, cwd, check=False)
        if proc.returncode != 0:
            print("%r refused on this host (%s); following the README's other path"
                  % (command, (proc.stdout + proc.stderr).strip().splitlines()[-1:]))
            for other in blocks[1]:
                run(other.split("  #")[0], env, cwd)
            return "other"
    return "main"


def test_readme_update_and_uninstall(tmp_path):
    """Install as the README says (the clone path when this host has no network for 0.22),
    then Update brings a new upstream commit and Uninstall leaves no plugin folder, no
    plugins.enabled entry and the built-in compressor selected."""
    install = readme_blocks()[0]
    with FakeLLM() as llm:
        home = harness.make_home(tmp_path, llm.url, engine="compressor", enabled_plugins=())
        url = git_snapshot(tmp_path / "repo")
        env = harness._child_env(home, None)
        env["PATH"] = str(harness.hermes_bin().parent) + os.pathsep + env.get("PATH", "")
        env["TENCENTDB_OFFLOAD_GATEWAY_URL"] = "off"
        run_install(install, url, home, env, tmp_path)
        plugin = home / "plugins" / "tencentdb-offload"
        marker = commit_change(tmp_path / "repo")
        update = section_blocks("Update")
        assert update[0] == ["hermes plugins update tencentdb-offload"], update
        path = run_first_that_works([update[0], update[1]], env, tmp_path)
        assert (plugin / "UPDATE_MARKER").read_text() == marker, "Update did not bring the new commit"
        print("update path:", path)
        uninstall = section_blocks("Uninstall")
        path = run_first_that_works(uninstall, env, tmp_path)
        print("uninstall path:", path)
        assert not plugin.exists()
        config = (home / "config.yaml").read_text()
        from tencentdb_offload.hermes.config import parse
        data, _ = parse(config)
        assert "tencentdb-offload" not in ((data.get("plugins") or {}).get("enabled") or []), config
        assert (data.get("context") or {}).get("engine") == "compressor", config
        listed = run("hermes plugins list", env, tmp_path).stdout
        assert "tencentdb-offload" not in listed, listed
