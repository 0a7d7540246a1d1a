"""The plugin loaded by the real Hermes plugin manager (the version this venv pins).

Each scenario runs in a subprocess with its own HERMES_HOME, because Hermes discovers
plugins once per process."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path


ROOT = Path(__file__).resolve().parents[2]
# what a user's clone holds, minus what Hermes never loads
COPY_IGNORE = shutil.ignore_patterns(".git", "__pycache__", "*.pyc", ".venv*", "tests", "bench")
HERMES_VERSION = os.environ.get("TDO_HERMES_VERSION", "")

PROBE = textwrap.dedent('''
    import copy, json, sys
    from run_agent import AIAgent
    import hermes_cli.plugins as hp
    agent = AIAgent(base_url="http://127.0.0.1:9/v1", api_key="sk-fake", provider="custom",
                    model="fake-model", quiet_mode=True, skip_context_files=True,
                    skip_memory=True, max_iterations=2)
    eng = agent.context_compressor
    pm = hp.get_plugin_manager()
    registered = hp.get_plugin_context_engine()
    cmd = pm._plugin_commands.get("tencentdb-offload") if hasattr(pm, "_plugin_commands") else None
    handler = cmd.get("handler") if isinstance(cmd, dict) else getattr(cmd, "handler", cmd)
    status = handler("status") if callable(handler) else None
    twin = copy.deepcopy(eng)
    import inspect
    try:    # 0.19 / 0.22: the host's turn-start gate, before any engine check
        from agent.turn_context import _should_run_preflight_estimate as gate
        short = [{"role": "user", "content": "hi"}] * 40
        opens = next((n for n in range(1, 40) if gate(short[:n], eng.protect_first_n,
                                                      eng.protect_last_n, eng.threshold_tokens)), None)
    except ImportError:
        opens = None
    print("PROBE " + json.dumps({
        "cls": type(eng).__name__, "name": getattr(eng, "name", None),
        "is_registered_instance": eng is registered,
        "shares_runtime": getattr(eng, "runtime", 1) is getattr(registered, "runtime", 2),
        "twin_shares_runtime": getattr(twin, "runtime", 1) is getattr(eng, "runtime", 2),
        "context_length": eng.context_length, "threshold_tokens": eng.threshold_tokens,
        "turn_start_gate_opens_at": opens,
        "engine_tools": sorted(n for n in agent.valid_tool_names if n.startswith("tdai")),
        "hooks": sorted(k for k, v in getattr(pm, "_hooks", {}).items() if v),
        "middleware": sorted(k for k, v in getattr(pm, "_middleware", {}).items() if v),
        "status": status,
        "compress_params": list(inspect.signature(eng.compress).parameters),
        "selects_context": getattr(type(eng), "select_context", None) is not
                           getattr(type(eng).__mro__[1], "select_context", None),
    }))
''')


def install(home: Path, enabled=True, engine="tencentdb-offload") -> None:
    target = home / "plugins" / "tencentdb-offload"
    target.parent.mkdir(parents=True)
    shutil.copytree(ROOT, target, ignore=COPY_IGNORE)
    plugins = "[tencentdb-offload]" if enabled else "[]"
    (home / "config.yaml").write_text(
        "model: {default: fake-model, provider: custom, base_url: 'http://127.0.0.1:9/v1', "
        "api_key: sk-fake, context_length: 100000}\n"
        "context: {engine: %s}\nplugins: {enabled: %s}\n" % (engine, plugins))
    (home / ".env").write_text("TENCENTDB_OFFLOAD_GATEWAY_URL=off\nTENCENTDB_OFFLOAD_THRESHOLD=0.8\n")


def probe(home: Path) -> dict:
    env = dict(os.environ, HERMES_HOME=str(home))
    env.pop("TENCENTDB_OFFLOAD_GATEWAY_URL", None)
    proc = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True,
                          text=True, timeout=180, stdin=subprocess.DEVNULL,
                          cwd=str(home))  # not the repo root: its tools.py would shadow Hermes
    line = next((l for l in proc.stdout.splitlines() if l.startswith("PROBE ")), None)
    assert line, "probe failed:\n%s\n%s" % (proc.stdout[-2000:], proc.stderr[-4000:])
    return json.loads(line[6:])


def test_hermes_selects_our_engine(tmp_path):
    home = tmp_path / "home"
    install(home)
    got = probe(home)
    assert got["cls"] == "TencentDBOffloadEngine" and got["name"] == "tencentdb-offload"
    assert got["context_length"] == 100_000
    assert got["threshold_tokens"] == 80_000          # TENCENTDB_OFFLOAD_THRESHOLD from .env
    assert got["engine_tools"] == ["tdai_offload_search", "tdai_read_cos"]
    assert {"post_tool_call", "pre_llm_call"} <= set(got["hooks"])
    if HERMES_VERSION.startswith("0.22"):
        assert got["middleware"] == [] and got["selects_context"]   # canvas per request instead
    else:
        assert got["middleware"] == ["llm_request"]
    assert got["shares_runtime"] and got["twin_shares_runtime"]
    assert "mode: local" in got["status"]
    assert {"messages", "current_tokens", "focus_topic"} <= set(got["compress_params"])
    if HERMES_VERSION.startswith(("0.19", "0.22")):
        # the host asks the engine at a turn start from a handful of messages on (an idle
        # compaction right after one that left few), not only past 10
        assert got["turn_start_gate_opens_at"] is not None and got["turn_start_gate_opens_at"] <= 5
    if HERMES_VERSION.startswith("0.19"):
        assert not got["is_registered_instance"]        # 0.19 deep-copies per agent
    if HERMES_VERSION.startswith("0.17"):
        assert got["is_registered_instance"]            # 0.17 shares the singleton


def test_not_enabled_falls_back_to_builtin(tmp_path):
    """Hermes silently uses its built-in compressor when the plugin is not enabled —
    the situation `doctor` warns about. This proves the probe can tell the difference."""
    home = tmp_path / "home"
    install(home, enabled=False)
    got = probe(home)
    if HERMES_VERSION.startswith("0.22"):
        # 0.22 loads a selected engine without plugins.enabled, but not its hooks
        assert got["cls"] == "TencentDBOffloadEngine"
        assert not {"post_tool_call", "pre_llm_call"} & set(got["hooks"])
        return
    assert got["cls"] != "TencentDBOffloadEngine"
    assert got["engine_tools"] == []


def test_install_scan_finds_nothing_that_needs_confirmation():
    """0.22's `hermes plugins install` scans the clone and refuses a "caution" verdict without a
    terminal to confirm on: the whole tree (tests and bench included) must scan "safe"."""
    try:
        from tools.plugin_guard import scan_plugin  # type: ignore
    except ImportError:
        return                                   # hosts before 0.22 do not scan
    result = scan_plugin(ROOT)
    serious = [(f.severity, f.file, f.line, f.match[:80]) for f in result.findings
               if f.severity in ("high", "critical")]
    assert result.verdict == "safe", serious
