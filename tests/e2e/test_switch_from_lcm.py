"""docs/switching-from-lcm.md, run as written against the real Hermes CLI: a home left by
hermes-lcm (``context.engine: lcm``, hermes-lcm enabled beside this plugin, LCM_* settings,
its lcm.db) fails doctor with the fix; after the section's commands doctor passes and the LCM
store is reported as searched read-only; the "going back" commands restore LCM; lcm.db is never
changed."""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402
import pytest  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
from fakes import lcm_store  # noqa: E402

DOC = ROOT / "docs" / "switching-from-lcm.md"
LEFT_BY_LCM = """model:
  default: some-model
context:
  engine: lcm
plugins:
  enabled:
    - hermes-lcm
    - tencentdb-offload
"""


def doc_blocks() -> list:
    """The section's bash blocks as lists of commands: [the switch, going back]."""
    text = DOC.read_text(encoding="utf-8")
    assert text.startswith("## Switching from hermes-lcm")
    blocks = [[l.strip() for l in b.splitlines() if l.strip() and not l.strip().startswith("#")]
              for b in re.findall(r"```bash\n(.*?)```", text, re.S)]
    assert len(blocks) == 2, blocks
    return blocks


def run(command: str, home: Path) -> subprocess.CompletedProcess:
    env = harness._child_env(home, {"PATH": "%s:%s" % (harness.hermes_bin().parent,
                                                        __import__("os").environ.get("PATH", ""))})
    return subprocess.run(["bash", "-c", command], capture_output=True, text=True, env=env,
                          timeout=120, cwd=str(home.parent))


def lcm_lines(out: str, status: str) -> list:
    return [l for l in out.splitlines() if l.startswith("%-4s  lcm " % status)]


HERMES_VERSION = harness.hermes_version() or ""


@pytest.mark.skipif(HERMES_VERSION.startswith(("0.17", "0.19")),
                    reason="the section's plugins.enabled line is for Hermes 0.22: 0.17 and 0.19 "
                           "store a list given to `hermes config set` as text (the section says what "
                           "to run there, and doctor fails on it; see test_doctor_lcm)")
def test_the_documented_switch_and_its_way_back(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    harness.install_plugin(home)
    (home / "config.yaml").write_text(LEFT_BY_LCM)
    (home / ".env").write_text("TENCENTDB_OFFLOAD_GATEWAY_URL=off\nLCM_CONTEXT_THRESHOLD=0.75\n"
                               "LCM_FRESH_TAIL_COUNT=32\n")
    db = lcm_store.build(home / "lcm.db", rows=900)
    digest = hashlib.sha256(db.read_bytes()).hexdigest()
    switch, back = doc_blocks()
    assert switch[0].endswith(" doctor") and switch[-1].endswith(" doctor")

    before = run(switch[0], home)
    assert before.returncode == 1, before.stdout + before.stderr
    engine = [l for l in lcm_lines(before.stdout, "fail") if "context.engine" in l]
    assert engine and "fix: hermes config set context.engine tencentdb-offload" in engine[0], before.stdout
    assert any("hermes-lcm" in l for l in lcm_lines(before.stdout, "warn")), before.stdout

    for command in switch[1:-1]:
        done = run(command, home)
        assert done.returncode == 0, (command, done.stdout, done.stderr)
    after = run(switch[-1], home)
    assert after.returncode == 0, after.stdout + after.stderr
    assert not lcm_lines(after.stdout, "fail") and not lcm_lines(after.stdout, "warn"), after.stdout
    assert any("901 messages" in l and "read-only" in l for l in lcm_lines(after.stdout, "pass")), after.stdout

    for command in back:
        assert run(command, home).returncode == 0, command
    again = run(switch[0], home)
    assert any("context.engine" in l for l in lcm_lines(again.stdout, "fail")), again.stdout
    assert hashlib.sha256(db.read_bytes()).hexdigest() == digest
    assert sorted(p.name for p in home.iterdir() if p.name.startswith("lcm")) == ["lcm.db"]
