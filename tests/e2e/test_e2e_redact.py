"""End-to-end: secrets stay on the machine, with the REAL Gateway behind a recording proxy.

``hermes chat`` turns put secrets of the common kinds (cloud keys, provider API tokens, a
private-key block, a JWT, passwords in a URL and in ``.env``-style lines) through ``terminal``
(``cat``) and ``read_file``, and one in a prompt; read turns then fill the window until the
plugin compacts through the Gateway. Checked:

- nothing the proxy forwarded to the Gateway holds any of them (ingest, L1.5 prompts,
  ``/compact``), nor does the Gateway's data directory afterwards;
- the model's requests still carry every secret Hermes showed it, where Hermes showed it;
- recall (``tdai_read_cos``) returns them from the local archive;
- the same turns with ``TENCENTDB_OFFLOAD_REDACT=false`` send them (the check can fail).

Runs on the current host (``real_gateway.CURRENT_HOST``: Hermes 0.22, whose own redactor runs
first, as people run it); the unit tests cover our patterns alone. Skips where no real Gateway
is beside the checkout.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Dict, List

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402
import real_gateway  # noqa: E402
from recording_proxy import RecordingProxy  # noqa: E402
from tests.fakes.fake_llm import FakeLLM  # noqa: E402

CONTEXT = 64000
THRESHOLD = 0.75
SECRETS: Dict[str, str] = {      # the secret, and the line that carries it
    "AKIAQX4ZPLMN7RT2VWYZ": "aws_access_key_id = AKIAQX4ZPLMN7RT2VWYZ",
    "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzQ8v3Lk2Pm": "aws_secret_access_key = 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",
    "sk-proj-Qm4v8XcT2bN7rL9pW3sK6yH1jF5dA0gZ": "OPENAI_API_KEY=sk-proj-Qm4v8XcT2bN7rL9pW3sK6yH1jF5dA0gZ",
    "sk-ant-api03-Zx8Yw7Vu6Ts5Rq4Po3Nm2Lk1Jh0GfEd": "ANTHROPIC_API_KEY=sk-ant-api03-Zx8Yw7Vu6Ts5Rq4Po3Nm2Lk1Jh0GfEd",
    "ghp_R7tY2uI9oP4aS6dF1gH8jK3lZ5xC0vB2nM4q": "export GITHUB_TOKEN=ghp_R7tY2uI9oP4aS6dF1gH8jK3lZ5xC0vB2nM4q",
    "Sup3rS3cretPw": "DATABASE_URL=postgres://app:Sup3rS3cretPw@db.internal:5432/prod",
    "correcthorsebattery": "DB_PASSWORD=correcthorsebattery",
    "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLez": (
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLez\n"
        "V6ffAt0gunVTLw7onLRnrq0\n-----END RSA PRIVATE KEY-----"),
    "eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ": (
        "SESSION_JWT=eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6"
        "IkpvaG4ifQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"),
}
PROMPT_SECRET = "Zq7Wx3Ec9Rv5Tb1Yn8Um"        # a token the user pastes in a prompt, .env-style


def leaked(text: str, window: int = 10) -> List[str]:
    """Secrets ``text`` holds whole or in part (``window`` characters of one)."""
    every = list(SECRETS) + [PROMPT_SECRET]
    return sorted(s for s in every if any(s[i:i + window] in text for i in range(len(s) - window + 1)))


def _around(text: str, window: int = 10) -> List[str]:
    """Where each leaked secret stands in ``text`` (test secrets: shown to explain a failure)."""
    out = []
    for s in leaked(text, window):
        at = next(text.find(s[i:i + window]) for i in range(len(s) - window + 1) if s[i:i + window] in text)
        out.append(text[max(0, at - 300):at + 100])
    return out


def _texts(raw: str) -> str:
    """A body's strings with JSON escapes undone (a secret split by ``\\n`` escapes shows)."""
    out: List[str] = [raw]

    def walk(v):
        if isinstance(v, str):
            out.append(v)
        elif isinstance(v, dict):
            for x in v.values():
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)
    for line in raw.splitlines():
        try:
            walk(json.loads(line))
        except ValueError:
            pass
    return "\n".join(out)


def _bodies(proxy: RecordingProxy) -> str:
    with proxy._lock:
        return "\n".join(_texts(b.decode("utf-8", "replace")) for _m, _p, b in proxy.requests)


def _on_disk(directory: Path) -> str:
    return "\n".join(p.read_bytes().decode("utf-8", "replace") for p in directory.rglob("*")
                     if p.is_file())


def _model_saw(llm) -> str:
    return "\n".join(harness.request_text(e.body) for e in llm.exchanges)


def _run(tmp: Path, gateway_url: str, redact: bool, fill: bool) -> dict:
    secrets_file = tmp / "files" / "deploy.env"
    secrets_file.parent.mkdir(parents=True, exist_ok=True)
    secrets_file.write_text("# deploy settings\n" + "\n".join(SECRETS.values()) + "\n")
    creds = tmp / "files" / "credentials"
    creds.write_text("[default]\n%s\n%s\n" % (SECRETS["AKIAQX4ZPLMN7RT2VWYZ"],
                                              SECRETS["wJalrXUtnFEMI/K7MDENG/bPxRfiCYzQ8v3Lk2Pm"]))
    with FakeLLM() as llm, RecordingProxy(gateway_url) as proxy:
        home = harness.make_home(tmp, llm.url, context_length=CONTEXT, env={
            "TENCENTDB_OFFLOAD_GATEWAY_URL": proxy.url, "TENCENTDB_OFFLOAD_THRESHOLD": str(THRESHOLD),
            "TENCENTDB_OFFLOAD_COMPACT_RATIO": "0.5", "TENCENTDB_OFFLOAD_REDACT": str(redact).lower()})
        conv = harness.Conversation(llm, home)
        ran = conv.say("DO run cat %s\ndeploy with API_TOKEN=%s" % (secrets_file, PROMPT_SECRET))
        harness.check_turn(ran, "run", "ran: ")
        shown_run = harness.request_text({"messages": ran.main[-1].body["messages"][-1:]})
        harness.read_files_turn(conv, [(str(creds), "")])
        shown_first = _model_saw(llm)
        run_id = next(cid for cid, name, _a in llm.tool_calls_issued if name == "terminal")
        if fill:
            supply = harness.FileSupply(tmp / "files", tag="rd")
            harness.fill_until_compactions(conv, supply, needed=1, threshold_tokens=int(CONTEXT * THRESHOLD),
                                           context_length=CONTEXT)
        recall = conv.say("DO recall %s" % run_id)
        status = harness.plugin_cli(home, "status")
        return {"sent": _bodies(proxy), "paths": proxy.paths(), "shown_first": shown_first,
                "shown_run": shown_run,
                "recall": harness.request_text(recall.main[-1].body), "status": status.stdout,
                "compactions": conv.compactions_by_turn(), "summary": conv.summary()}


def _with_gateway(tmp_path_factory, redact: bool, fill: bool) -> dict:
    reason = real_gateway.skip_reason(real_gateway.CURRENT_HOST)   # the redactor is the host's own there
    if reason:
        pytest.skip(reason)
    gateway = real_gateway.RealGateway(tmp_path_factory.mktemp("real-gateway"))
    try:
        out = _run(tmp_path_factory.mktemp("redact"), gateway.start().url, redact, fill)
        out["gateway_data"] = _on_disk(gateway.run_dir / "data")
        return out
    finally:
        gateway.stop()


@pytest.fixture(scope="module")
def masked(tmp_path_factory):
    return _with_gateway(tmp_path_factory, redact=True, fill=True)


@pytest.fixture(scope="module")
def unmasked(tmp_path_factory):
    return _with_gateway(tmp_path_factory, redact=False, fill=False)


def test_hermes_showed_the_model_the_secrets(masked):
    # Hermes masks some at the source (0.22: most of a ``cat`` of a .env file); what it shows
    # the model the plugin must keep off the Gateway: the test has some to keep
    shown = leaked(masked["shown_first"])
    assert PROMPT_SECRET in shown and len(shown) >= 3, shown


def test_no_secret_reaches_the_gateway(masked):
    assert any("/compact" in p for p in masked["paths"]), masked["summary"]
    assert any("/ingest" in p for p in masked["paths"])
    assert leaked(masked["sent"]) == [], _around(masked["sent"])
    assert leaked(masked["gateway_data"]) == [], _around(masked["gateway_data"])


def test_the_model_keeps_what_it_was_shown_and_recall_returns_it(masked):
    shown = set(leaked(masked["shown_run"]))        # the terminal output as the model read it
    assert shown, masked["summary"]
    # read back from the local archive, after the Gateway compacted the context
    assert masked["compactions"], masked["summary"]
    assert shown <= set(leaked(masked["recall"])), (sorted(shown - set(leaked(masked["recall"]))),
                                                    masked["summary"])
    assert "masked before leaving for the Gateway" in masked["status"] and leaked(masked["status"]) == []


def test_with_redaction_off_the_secrets_are_sent(unmasked):
    shown = set(leaked(unmasked["shown_first"]))
    assert shown and shown <= set(leaked(unmasked["sent"])), sorted(shown - set(leaked(unmasked["sent"])))
