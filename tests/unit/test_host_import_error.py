"""A Hermes whose ``agent.context_engine`` raises on import is reported loudly (issue 27).

Outside Hermes the plugin's stand-in base class is right; inside a Hermes whose module
raises something other than "no such module", the host would reject the engine and use its
built-in compressor. The plugin logs that at ERROR and shows it in status and doctor.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent
ROOT = TESTS.parent

PROBE = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from conftest import load_plugin
plugin = load_plugin()
rt = plugin.build_runtime(env=json.loads(sys.argv[2]))
print(json.dumps(rt.status()["warnings"]))
rt.close()
"""


def broken_hermes(tmp_path):
    pkg = tmp_path / "hermes_site" / "agent"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("", encoding="utf-8")
    (pkg / "context_engine.py").write_text("raise RuntimeError('provider table is broken')\n",
                                           encoding="utf-8")
    return str(tmp_path / "hermes_site")


def child_env(tmp_path, site):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TENCENTDB_OFFLOAD_", "HERMES_"))}
    env.update(PYTHONPATH=site, HERMES_HOME=str(tmp_path / "home"), PYTHONDONTWRITEBYTECODE="1",
               TENCENTDB_OFFLOAD_GATEWAY_URL="off")
    return env


def test_a_broken_hermes_module_is_logged_at_error_and_shown_in_status(tmp_path):
    env = child_env(tmp_path, broken_hermes(tmp_path))
    settings = {"HERMES_HOME": env["HERMES_HOME"], "TENCENTDB_OFFLOAD_GATEWAY_URL": "off"}
    proc = subprocess.run([sys.executable, "-c", PROBE, str(TESTS), json.dumps(settings)],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    warnings = json.loads(proc.stdout.splitlines()[-1])
    assert any("agent.context_engine" in w and "provider table is broken" in w for w in warnings)
    assert "provider table is broken" in proc.stderr       # logged (ERROR reaches stderr)


def test_doctor_fails_on_a_broken_hermes_module(tmp_path):
    env = child_env(tmp_path, broken_hermes(tmp_path))
    (tmp_path / "home").mkdir()
    proc = subprocess.run([sys.executable, str(ROOT), "doctor"], capture_output=True, text=True,
                          env=env, timeout=180, cwd=str(tmp_path))
    line = next((x for x in proc.stdout.splitlines() if "agent.context_engine" in x), "")
    assert "provider table is broken" in line, proc.stdout
    assert proc.returncode != 0


def test_no_hermes_at_all_is_not_an_error(tmp_path):
    env = child_env(tmp_path, str(tmp_path / "empty"))
    settings = {"HERMES_HOME": env["HERMES_HOME"], "TENCENTDB_OFFLOAD_GATEWAY_URL": "off"}
    proc = subprocess.run([sys.executable, "-c", PROBE, str(TESTS), json.dumps(settings)],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert not any("agent.context_engine" in w for w in json.loads(proc.stdout.splitlines()[-1]))
