"""``$HERMES_HOME/.env`` and ``HERMES_HOME`` read as Hermes reads them (issue 51 item 4).

Hermes 0.17-0.22 load ``.env`` with python-dotenv, which expands ``${VAR}`` and
``${VAR:-default}`` (not ``$VAR``) against the lines above and the environment; Hermes 0.22
expands ``$VAR``/``${VAR}`` and ``~`` in ``HERMES_HOME``. The command line read both literally:
``STORE_DIR=${HOME}/…`` found no store, doctor sent ``Bearer ${TDAI_GATEWAY_API_KEY}``, and
doctor's ``sed`` fix for the "relative" store directory wrote a broken path into ``.env``."""

from __future__ import annotations

import json
import time

import pytest

from tencentdb_offload.archive.store import ArchiveItem, Store
from tencentdb_offload.hermes.config import hermes_home
from tencentdb_offload.ops.env import effective_env, read_dotenv

from test_cli import run_cli
from test_cli_doctor import GOOD_CONFIG, FakeGateway, install
from helpers import archive_items

# every case checked against python-dotenv 1.2.2's dotenv_values (Hermes 0.19/0.22's), environment
# HOME=/h, EMPTY="" and M_ENV=fromenv
DOTENV = r"""A=${HOME}/x
B='${HOME}/y'
C="${NOPE:-def}/z"
D=$HOME/w
E=${A}/e
F=${EMPTY:-dflt}
G=${NOPE-x}
H=${NOPE:x}
I=pre${}post
J="a\${HOME}"
BARE
K=${BARE:-k}
L=${LATER}
LATER=later
M=${M_ENV}
HOME=/mine
N=${HOME}
"""
EXPECTED = {"A": "/h/x", "B": "/h/y", "C": "def/z", "D": "$HOME/w", "E": "/h/x/e", "F": "",
            "G": "", "H": "${NOPE:x}", "I": "prepost", "J": "a\\/h", "K": "", "L": "",
            "LATER": "later", "M": "fromenv", "HOME": "/mine", "N": "/mine"}


def test_dotenv_values_are_expanded_as_python_dotenv_expands_them(tmp_path):
    (tmp_path / ".env").write_text(DOTENV)
    environ = {"HOME": "/h", "EMPTY": "", "M_ENV": "fromenv"}
    assert read_dotenv(tmp_path / ".env", environ=environ) == EXPECTED


def test_hermes_home_expands_variables_as_hermes_0_22(tmp_path):
    env = {"BASE": str(tmp_path), "HERMES_HOME": " ${BASE}/h1 "}
    assert hermes_home(env) == tmp_path / "h1"
    assert hermes_home({"BASE": str(tmp_path), "HERMES_HOME": "$BASE/h2"}) == tmp_path / "h2"
    assert hermes_home({"HERMES_HOME": "$NOT_SET/h3"}) == type(tmp_path)("$NOT_SET/h3")


def test_the_dotenv_of_an_expanded_home_sets_the_store(tmp_path):
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / ".env").write_text("TENCENTDB_OFFLOAD_STORE_DIR=${BASE}/kept\n")
    env = effective_env({"BASE": str(tmp_path), "HERMES_HOME": "$BASE/home"})
    assert env["TENCENTDB_OFFLOAD_STORE_DIR"] == "%s/kept" % tmp_path


def _kept_store(directory):
    st = Store(directory)
    archive_items(st, "conv-1", [ArchiveItem("tool_result", "alpha " * 50, "c1", "grep")])
    st.transaction([Store.op_event("conv-1", "compaction", {
        "path": "local", "level": "", "tokens_before": 900, "tokens_after": 400, "archived": 1},
        time.time())])
    st.close()


def test_status_finds_the_store_a_dotenv_variable_names(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    _kept_store(tmp_path / "kept")
    (home / ".env").write_text("TENCENTDB_OFFLOAD_STORE_DIR=${TDO_BASE}/kept\n")
    proc = run_cli("status", "--json", home=home,
                   env={"TDO_BASE": str(tmp_path), "HERMES_HOME": "${TDO_BASE}/home"})
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert got["store_dir"] == str(tmp_path / "kept") and got["exists"], got["store_dir"]
    assert [s["session"] for s in got["sessions"]] == ["conv-1"]


@pytest.fixture(scope="module")
def gateway():
    gw = FakeGateway(api_key="right").start()
    yield gw
    gw.stop()


def test_doctor_sends_the_key_a_dotenv_variable_names_and_fixes_no_expanded_path(tmp_path, gateway):
    home = tmp_path / "home"
    home.mkdir()
    install(home)
    (home / "config.yaml").write_text(GOOD_CONFIG)
    (tmp_path / "kept").mkdir()
    (home / ".env").write_text(
        "TENCENTDB_OFFLOAD_GATEWAY_URL=%s\nTENCENTDB_OFFLOAD_API_KEY=${TDAI_GATEWAY_API_KEY}\n"
        "TENCENTDB_OFFLOAD_INSTANCE_ID=inst-1\nTENCENTDB_OFFLOAD_STORE_DIR=${TDO_BASE}/kept\n"
        % gateway.url)
    proc = run_cli("doctor", "--json", "--timeout", "2", home=home,
                   env={"TDAI_GATEWAY_API_KEY": "right", "TDO_BASE": str(tmp_path)})
    checks = json.loads(proc.stdout)["checks"]
    refused = [c for c in checks if "refused the credentials" in c["message"]]
    assert not refused, refused
    gw = [c for c in checks if c["name"] == "gateway"]
    assert gw and all(c["status"] == "pass" for c in gw), gw
    settings = [c for c in checks if c["name"] == "settings"]
    assert all(c["status"] == "pass" for c in settings), settings
    assert not [c for c in checks if "${" in (c.get("fix") or "")], checks
