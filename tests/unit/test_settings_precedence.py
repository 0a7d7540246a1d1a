"""A setting set in two places: the plugin applies the one Hermes applies, and doctor and
status say which one that is. Hermes 0.17-0.22 load ``$HERMES_HOME/.env`` over the shell's
environment (``load_hermes_dotenv``, override on), and the plugin reads the environment before
the ``tencentdb_offload:`` block of config.yaml. Before, a shell's
``TENCENTDB_OFFLOAD_GATEWAY_URL`` lost to ``.env`` without a word: doctor checked and passed
the ``.env`` value while the user believed the shell's was tested."""

from __future__ import annotations

import json
import re
import socket
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))

from tests.fakes.gateway import FakeGateway  # noqa: E402
from helpers import run_cli  # noqa: E402

CONFIG = "context:\n  engine: tencentdb-offload\nplugins:\n  enabled: [tencentdb-offload]\n"


@pytest.fixture(scope="module")
def gateway():
    gw = FakeGateway().start()
    yield gw
    gw.stop()


def unused_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return "http://127.0.0.1:%d" % s.getsockname()[1]


def make_home(tmp_path: Path, dotenv: str, config: str = CONFIG) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    (home / ".env").write_text(dotenv)
    (home / "config.yaml").write_text(config)
    return home


def test_doctor_checks_the_dotenv_value_and_says_the_shells_is_overridden(tmp_path, gateway):
    shell_url = unused_url()
    home = make_home(tmp_path, "TENCENTDB_OFFLOAD_GATEWAY_URL=%s\n" % gateway.url)
    proc = run_cli(["doctor", "--json", "--timeout", "2"], cwd=tmp_path,
                   env={"HERMES_HOME": str(home), "TENCENTDB_OFFLOAD_GATEWAY_URL": shell_url})
    items = json.loads(proc.stdout)["checks"]
    gw = [c for c in items if c["name"] == "gateway"]
    # the value Hermes would use is the one checked: the Gateway in .env answers
    assert gw and gw[0]["status"] == "pass" and gateway.url in gw[0]["message"], gw
    said = [c for c in items if c["name"] == "settings" and "overrides" in c["message"]]
    assert len(said) == 1 and said[0]["status"] == "warn", items
    message = said[0]["message"]
    assert message.startswith("TENCENTDB_OFFLOAD_GATEWAY_URL: '%s' from %s" % (gateway.url, home / ".env"))
    assert "'%s' in the shell's environment" % shell_url in message
    assert said[0]["fix"].startswith("unset TENCENTDB_OFFLOAD_GATEWAY_URL")


def test_status_names_the_winner_of_each_disagreement(tmp_path):
    home = make_home(tmp_path, "TENCENTDB_OFFLOAD_GATEWAY_URL=off\nTENCENTDB_OFFLOAD_API_KEY=from-file\n",
                     CONFIG + "tencentdb_offload:\n  threshold: 0.7\n  canvas: true\n")
    proc = run_cli(["status"], cwd=tmp_path, env={
        "HERMES_HOME": str(home), "TENCENTDB_OFFLOAD_GATEWAY_URL": "http://127.0.0.1:19199",
        "TENCENTDB_OFFLOAD_API_KEY": "from-shell", "TENCENTDB_OFFLOAD_THRESHOLD": "0.8",
        "TENCENTDB_OFFLOAD_CANVAS": "true"})
    assert proc.returncode == 0, proc.stderr
    lines = [l for l in proc.stdout.splitlines() if "overrides" in l]
    url = next(l for l in lines if "GATEWAY_URL" in l)
    assert "'off' from %s" % (home / ".env") in url and "19199" in url
    key = next(l for l in lines if "API_KEY" in l)
    assert "from-file" not in key and "from-shell" not in key and "(hidden)" in key    # never printed
    threshold = next(l for l in lines if "THRESHOLD" in l)
    assert "'0.8' from the shell's environment" in threshold and "block of" in threshold
    # the same value in two places is no disagreement
    assert not any("CANVAS" in l for l in lines), lines
    # what status reports is the value in effect: .env's, the Gateway off
    assert "mode: local" in proc.stdout.splitlines()[0] or "off" in proc.stdout.splitlines()[0], proc.stdout


def test_one_source_says_nothing(tmp_path):
    home = make_home(tmp_path, "TENCENTDB_OFFLOAD_THRESHOLD=0.7\n")
    proc = run_cli(["status"], cwd=tmp_path, env={"HERMES_HOME": str(home),
                                                   "TENCENTDB_OFFLOAD_THRESHOLD": "0.7"})
    assert "overrides" not in proc.stdout, proc.stdout


def test_the_readme_states_the_order_once():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    configure = text.split("## Configure", 1)[1].split("\n## ", 1)[0]
    order = re.search(r"the first wins,\s+as in Hermes[^:]*: `\.env` \(Hermes loads it over the shell[^)]*\), "
                      r"then the\s+shell's environment, then the block", configure)
    assert order, configure
    assert "environment wins over the block" not in text
