"""The README's first screen: at most 60 lines, and every command in it is run by a test —
the two commands here, the install and Gateway blocks by tests/e2e/test_e2e_install.py; the
offline install lists every step, and Uninstall says what Hermes 0.22 prints."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCREEN = 60


def first_screen() -> str:
    return "\n".join((ROOT / "README.md").read_text(encoding="utf-8").splitlines()[:SCREEN])


def commands(text: str) -> list:
    out = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        out += [line.split("  #")[0].strip() for line in block.splitlines()
                if line.strip() and not line.lstrip().startswith("#")]
    return out


def test_first_screen_fits_and_names_no_level_before_explaining_it():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    screen = first_screen()
    assert "## Install" in screen and "## Two commands" in screen
    glossary = text.index("## The Gateway's levels")
    assert glossary < len(screen), "the glossary must be on the first screen"
    for word in ("L1", "L1.5", "L2", "L3", "offload V2"):
        assert not re.search(r"\b%s\b" % re.escape(word), text[:glossary]), word
    assert "0.17.0 –\n0.22.2" in text[:400] or "0.17.0 – 0.22.2" in text[:400]


def test_every_first_screen_command_is_run(tmp_path):
    cmds = commands(first_screen())
    install_block = {"hermes plugins install", "hermes config set", "python3 \"${HERMES_HOME",
                     "echo \"TENCENTDB_OFFLOAD_GATEWAY_URL", "git clone "}   # run by tests/e2e/test_e2e_install.py
    here = [c for c in cmds if not any(c.startswith(p) for p in install_block)]
    assert here == ["python3 . demo", "python3 tests/run.py"], cmds
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TENCENTDB_OFFLOAD_", "HERMES_"))}
    env.update(HERMES_HOME=str(tmp_path / "home"), PYTHONDONTWRITEBYTECODE="1", PYTHONIOENCODING="utf-8")
    demo = subprocess.run([sys.executable, "."] + here[0].split()[2:], cwd=str(ROOT), env=env,
                          capture_output=True, text=True, timeout=300)
    assert demo.returncode == 0 and "mode: LOCAL" in demo.stdout, demo.stderr
    assert not (tmp_path / "home").exists(), "the demo wrote into HERMES_HOME"
    # the test command itself: its entry point answers (running it here would recurse)
    suite = subprocess.run([sys.executable, "tests/run.py", "--help"], cwd=str(ROOT), env=env,
                           capture_output=True, text=True, timeout=60)
    assert suite.returncode == 0 and "--unit" in suite.stdout, suite.stderr


def test_every_setting_is_in_the_readme_table():
    from tencentdb_offload.settings.config import PREFIX, SPEC
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    table = text[text.index("## Settings"):text.index("\n## ", text.index("## Settings") + 5)]
    missing = [PREFIX + k for k in SPEC if "| `%s%s` |" % (PREFIX, k) not in table]
    assert not missing, missing


def section(name: str) -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index("## " + name)
    end = text.find("\n## ", start + 3)
    return text[start:] if end < 0 else text[start:end]


def test_the_offline_install_lists_every_step_in_order():
    """Without network the clone and the enable line replace `hermes plugins install --enable`;
    every later step of the online block follows, as commands, in the same order."""
    online, offline = [commands("```bash\n%s```" % b) for b in
                       re.findall(r"```bash\n(.*?)```", section("Install"), re.S)[:2]]
    assert online[0].startswith("hermes plugins install ") and "--enable" in online[0], online
    assert offline[0].startswith("git clone ") and offline[1].startswith(
        "hermes config set plugins.enabled"), offline
    assert offline[2:] == online[1:], "the offline path must go on with %s, has %s" % (online[1:], offline[2:])


def test_uninstall_says_what_hermes_022_prints_and_that_it_is_harmless():
    text = " ".join(section("Uninstall").split())
    for said in ("AdmissionRefused", "python-build-standalone", "✗ Plugin tencentdb-offload removed",
                 "exits 0", "harmless"):
        assert said in text, said


def test_the_readme_table_shows_each_settings_default():
    """The default column is what the plugin uses when a setting is left unset."""
    from dataclasses import fields
    from tencentdb_offload.settings.config import PREFIX, SPEC, Settings
    defaults = {f.name: f.default for f in fields(Settings)}
    defaults["store_dir"] = "$HERMES_HOME/tencentdb-offload"     # "" stands for it
    shown = dict(re.findall(r"^\| `%s(\w+)` \| `([^`]*)` \|" % PREFIX, section("Settings"), re.M))
    wrong = {}
    for suffix, (attr, _parse) in SPEC.items():
        want = defaults[attr]
        want = str(want).lower() if isinstance(want, bool) else str(want)
        if shown.get(suffix) != want:
            wrong[PREFIX + suffix] = (shown.get(suffix), want)
    assert not wrong, "README default vs the code's: %s" % wrong


def test_the_forms_for_running_from_elsewhere_work_and_are_named(tmp_path):
    """Outside the clone `python3 . demo` gets Python's "can't find '__main__' module", and
    neither `python3 <plugin dir> demo` nor `python3 -m tencentdb-offload demo` was documented.
    Both are on the first screen, with the unit-only test command beside the full one."""
    screen = first_screen()
    for form in ("python3 <plugin dir> demo", "python3 -m\ntencentdb-offload demo",
                 "python3 tests/run.py --unit", "can't find '__main__' module"):
        assert form in screen, form
    (tmp_path / "tencentdb-offload").symlink_to(ROOT, target_is_directory=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TENCENTDB_OFFLOAD_", "HERMES_"))}
    env.update(HERMES_HOME=str(tmp_path / "home"), PYTHONDONTWRITEBYTECODE="1", PYTHONIOENCODING="utf-8")
    for argv in ([str(ROOT)], ["-m", "tencentdb-offload"]):
        proc = subprocess.run([sys.executable] + argv + ["demo", "--turns", "2"], cwd=str(tmp_path),
                              env=env, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0 and "mode: LOCAL" in proc.stdout, (argv, proc.stderr)


def test_no_documented_command_writes_into_the_plugin_folder():
    """The README's `--store ./kept-demo` and `--out demo.html`, run in the plugin folder as it
    says, left a store and a page in the checkout `git pull` updates. Every path a documented
    command writes is outside it (under ~), and git ignores the old names."""
    written = []
    for doc in ("README.md", "docs/commands.md"):
        for cmd in commands((ROOT / doc).read_text(encoding="utf-8")):
            written += re.findall(r"--(?:store|out) (\S+)", cmd)
    assert written and all(p.startswith(("~/", "/", "$", "\"$")) for p in written), written
    ignored = (ROOT / ".gitignore").read_text(encoding="utf-8").split()
    assert "/kept-demo/" in ignored and "/demo.html" in ignored
