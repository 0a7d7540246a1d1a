"""``doctor``: every misconfiguration it claims to catch is created here and must fail the
run with the right check; one good setup passes. Runs without Hermes (the stdlib config
reader); under a Hermes venv the same tests go through Hermes' own config reader."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # for ``tests.fakes``; appended so plugin modules never shadow
    sys.path.append(str(ROOT))

from tests.fakes.gateway import FakeGateway  # noqa: E402

NAME = "tencentdb-offload"
GOOD_CONFIG = """# written by a person, not JSON
model:
  default: some-model
context:
  engine: tencentdb-offload   # our engine
plugins:
  enabled:
    - other-plugin
    - tencentdb-offload
"""


@pytest.fixture(scope="module")
def gateway():
    gw = FakeGateway(api_key="right").start()
    yield gw
    gw.stop()


def unused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def install(home: Path) -> Path:
    dest = home / "plugins" / NAME
    dest.mkdir(parents=True)
    for f in list(ROOT.glob("*.py")) + [ROOT / "plugin.yaml"]:
        shutil.copy2(f, dest / f.name)
    return dest


def setup_home(tmp_path: Path, gw: FakeGateway, env: dict = None, config: str = GOOD_CONFIG,
               plugin: bool = True) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    if plugin:
        install(home)
    (home / "config.yaml").write_text(config)
    settings = {"TENCENTDB_OFFLOAD_GATEWAY_URL": gw.url, "TENCENTDB_OFFLOAD_API_KEY": "right",
                "TENCENTDB_OFFLOAD_INSTANCE_ID": "inst-1"}
    settings.update(env or {})
    (home / ".env").write_text("".join("%s=%s\n" % kv for kv in settings.items() if kv[1] is not None))
    return home


def doctor(home: Path, *extra: str):
    e = {k: v for k, v in os.environ.items() if not k.startswith(("TENCENTDB_OFFLOAD_", "HERMES_"))}
    e.update(HERMES_HOME=str(home), PYTHONDONTWRITEBYTECODE="1", PYTHONIOENCODING="utf-8")
    return subprocess.run([sys.executable, str(ROOT), "doctor", "--json", "--timeout", "2"] + list(extra),
                          capture_output=True, text=True, env=e, timeout=60, cwd=str(home.parent))


def checks(proc) -> list:
    return json.loads(proc.stdout)["checks"]


def test_good_setup_passes(tmp_path, gateway):
    home = setup_home(tmp_path, gateway)
    proc = doctor(home)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    items = checks(proc)
    assert [c for c in items if c["status"] == "fail"] == []
    names = {c["name"] for c in items if c["status"] == "pass"}
    assert {"python", "install", "config", "settings", "gateway", "store"} <= names
    text = " ".join(c["message"] for c in items)
    assert "accepted" in text and "version 0.1.0" in text and "ms" in text
    plain = subprocess.run([sys.executable, str(ROOT), "doctor"], capture_output=True, text=True,
                           env=dict(os.environ, HERMES_HOME=str(home), PYTHONDONTWRITEBYTECODE="1"),
                           timeout=60)
    assert plain.returncode == 0 and "all checks passed" in plain.stdout
    assert all(line.split()[0] in ("pass", "warn") for line in plain.stdout.splitlines()[:-2] if line)
    # doctor reads; it writes nothing into HERMES_HOME
    assert sorted(p.name for p in home.iterdir()) == [".env", "config.yaml", "plugins"]


CASES = {
    # name: (env overrides, config text, plugin installed, failing check, text in its message)
    "plugin not enabled": ({}, GOOD_CONFIG.replace("    - tencentdb-offload\n", ""), True,
                           "config", "plugins.enabled"),
    "no plugins section": ({}, "context:\n  engine: tencentdb-offload\n", True,
                           "config", "plugins.enabled"),
    "wrong engine name": ({}, GOOD_CONFIG.replace("engine: tencentdb-offload", "engine: tencentdb_offload"),
                          True, "config", "context.engine"),
    "plugin not installed": ({}, GOOD_CONFIG, False, "install", "no tencentdb-offload plugin"),
    "bad setting value": ({"TENCENTDB_OFFLOAD_THRESHOLD": "high"}, GOOD_CONFIG, True,
                          "settings", "TENCENTDB_OFFLOAD_THRESHOLD"),
    "bad setting in config block": ({}, GOOD_CONFIG + "tencentdb_offload:\n  compact_ratio: 7\n", True,
                                    "settings", "compact_ratio"),
    "gateway down": ({"TENCENTDB_OFFLOAD_GATEWAY_URL": "http://127.0.0.1:%d" % unused_port()},
                     GOOD_CONFIG, True, "gateway", "failed"),
    "wrong key": ({"TENCENTDB_OFFLOAD_API_KEY": "wrong"}, GOOD_CONFIG, True,
                  "gateway", "refused the credentials"),
    "wrong url": ({"TENCENTDB_OFFLOAD_GATEWAY_URL": "{url}/not-the-gateway"}, GOOD_CONFIG, True,
                  "gateway", "no Gateway answers at this URL"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_each_misconfiguration_fails_its_check(tmp_path, gateway, case):
    env, config, plugin, check, needle = CASES[case]
    env = {k: v.replace("{url}", gateway.url) for k, v in env.items()}
    home = setup_home(tmp_path, gateway, env, config, plugin)
    proc = doctor(home)
    assert proc.returncode == 1, proc.stdout
    failed = [c for c in checks(proc) if c["status"] == "fail"]
    assert [c["name"] for c in failed] == [check], failed
    assert needle in failed[0]["message"] and failed[0]["fix"], failed[0]
    err = proc.stderr.strip().splitlines()
    assert len(err) == 1 and "1 check(s) failed" in err[0], proc.stderr


def test_wrong_plugin_kind_and_outbox_warning(tmp_path, gateway):
    home = setup_home(tmp_path, gateway, {"TENCENTDB_OFFLOAD_GATEWAY_URL": "off"})
    yml = home / "plugins" / NAME / "plugin.yaml"
    yml.write_text(yml.read_text().replace("kind: standalone", "kind: backend"))
    store = home / "tencentdb-offload"
    store.mkdir()
    import sqlite3
    conn = sqlite3.connect(str(store / "store.db"))
    conn.execute("CREATE TABLE outbox(id INTEGER PRIMARY KEY, session TEXT NOT NULL, kind TEXT NOT NULL, "
                 "payload TEXT NOT NULL, created REAL NOT NULL, attempts INTEGER NOT NULL DEFAULT 0, "
                 "dead INTEGER NOT NULL DEFAULT 0, last_error TEXT)")
    conn.execute("INSERT INTO outbox(session, kind, payload, created) VALUES ('s', 'pair', '{}', 0)")
    conn.commit()
    conn.close()
    proc = doctor(home)
    items = checks(proc)
    assert proc.returncode == 1
    assert [c["name"] for c in items if c["status"] == "fail"] == ["install"]
    assert any(c["name"] == "outbox" and c["status"] == "warn" and "1 rows waiting" in c["message"]
               for c in items), items


def test_stdlib_yaml_reader_reads_what_hermes_configs_hold():
    from tencentdb_offload.ops.env import mini_yaml
    text = ("model:\n  default: \"gpt-x\"   # comment\n  context_length: 128000\n"
            "toolsets:\n  - name: a\n    enabled: true\n  - plain\n"
            "context: {engine: tencentdb-offload}\n"
            "plugins:\n  enabled: [foo, 'tencentdb-offload']\n  disabled:\n  - bar\n"
            "tencentdb_offload:\n  threshold: 0.8\n  gateway_url: http://x:1  # c\n"
            "  note: \"a # kept\"\ndesc: >-\n  long\n  text\nafter: 1\n")
    assert mini_yaml(text) == {
        "model": {"default": "gpt-x", "context_length": 128000},
        "toolsets": [{"name": "a", "enabled": True}, "plain"],
        "context": {"engine": NAME}, "plugins": {"enabled": ["foo", NAME], "disabled": ["bar"]},
        "tencentdb_offload": {"threshold": 0.8, "gateway_url": "http://x:1", "note": "a # kept"},
        "desc": "long\ntext", "after": 1}
    assert mini_yaml('{"context": {"engine": "x"}}') == {"context": {"engine": "x"}}
    manifest = mini_yaml((ROOT / "plugin.yaml").read_text())
    assert manifest["name"] == NAME and manifest["kind"] == "standalone"


def test_dotenv_reader(tmp_path):
    from tencentdb_offload.ops.env import read_dotenv
    env = tmp_path / ".env"
    env.write_text("# comment\nexport A=1\nB = 'two words'\nC=\"x=y\"\nD=plain # note\nnot a line\n")
    assert read_dotenv(env) == {"A": "1", "B": "two words", "C": "x=y", "D": "plain"}
