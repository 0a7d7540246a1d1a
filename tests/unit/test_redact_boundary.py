"""Secrets stay on the machine: everything sent to the Gateway is masked on the sending thread
(ingest pairs, L1.5 prompts, /compact bodies), the model's context keeps what it was shown,
the local archive keeps the originals (masked at rest only when asked), status counts what
was masked and never shows it. The fake Gateway records every request over a real socket."""

import json
import sqlite3
import threading

import pytest

from fakes.gateway import FakeGateway
from tencentdb_offload.context.redact import Redactor, strict
from tencentdb_offload.context import messages
from tencentdb_offload.hooks import HookHandlers
from tencentdb_offload.ops.report_data import figures as report_figures
from tencentdb_offload.status.render import render

from helpers import conversation, make_engine

PEM = ("-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLez"
       "V6ffAt0gunVTLw7onLRnrq0\n-----END RSA PRIVATE KEY-----")
SECRETS = {      # what must not leave, and the text that carries it
    "AKIAQX4ZPLMN7RT2VWYZ": "aws_access_key_id = AKIAQX4ZPLMN7RT2VWYZ",
    "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzQ8v3Lk2Pm": "aws_secret_access_key = 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",
    "sk-proj-Qm4v8XcT2bN7rL9pW3sK6yH1jF5dA0gZ": "OPENAI_API_KEY=sk-proj-Qm4v8XcT2bN7rL9pW3sK6yH1jF5dA0gZ",
    "ghp_R7tY2uI9oP4aS6dF1gH8jK3lZ5xC0vB2nM4q": "token: ghp_R7tY2uI9oP4aS6dF1gH8jK3lZ5xC0vB2nM4q",
    "Sup3rS3cretPw": "DATABASE_URL=postgres://app:Sup3rS3cretPw@db.internal:5432/prod",
    "correcthorsebattery": "DB_PASSWORD=correcthorsebattery",
    "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLez": PEM,
    "eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ": (
        "Authorization: Bearer eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkw"
        "IiwibmFtZSI6IkpvaG4ifQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"),
}
ENV_DUMP = "\n".join(["HOME=/home/dev", "PATH=/usr/bin:/bin"] + list(SECRETS.values()))


def leaked(text: str, window: int = 10):
    """The secrets ``text`` holds whole or in part (any ``window`` characters of one: a quote
    cut at its limit leaks its head; a mask keeps at most 6 + 4)."""
    return sorted(s for s in SECRETS if any(s[i:i + window] in text
                                            for i in range(len(s) - window + 1)))


def drive(hooks, sid="s1"):
    """A turn whose prompt, call arguments and results carry every secret."""
    hooks.pre_llm_call(session_id=sid, user_message="deploy with key " + SECRETS["Sup3rS3cretPw"],
                       conversation_history=[])
    hooks.post_tool_call(tool_name="terminal", args={"command": "env"}, result=ENV_DUMP,
                         session_id=sid, tool_call_id="call_env")
    hooks.post_tool_call(tool_name="read_file", args={"path": "/home/dev/.aws/credentials"},
                         result="[default]\n" + SECRETS["AKIAQX4ZPLMN7RT2VWYZ"] + "\n" +
                         SECRETS["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"],
                         session_id=sid, tool_call_id="call_aws")
    hooks.post_tool_call(tool_name="terminal", args={"command": "curl -H '%s' api" % SECRETS[
        "eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ"]}, result="ok", session_id=sid,
        tool_call_id="call_curl")


def sent_to_gateway(gw) -> str:
    return "\n".join(json.dumps(r.body, ensure_ascii=False) for r in gw.requests)


def on_disk(directory) -> str:
    return "\n".join(p.read_bytes().decode("utf-8", "replace")
                     for p in directory.rglob("*") if p.is_file())


@pytest.mark.parametrize("redact", ["true", "false"])
def test_no_secret_in_any_ingest_or_prompt_sent(tmp_path, redact):
    with FakeGateway() as gw:
        rt, eng = make_engine(tmp_path, gateway_url=gw.url, redact=redact)
        drive(HookHandlers(rt))
        assert rt.flush("s1", 10)
        sent = sent_to_gateway(gw)
        assert "call_env" in sent and "/home/dev/.aws/credentials" in sent    # what was sent
        if redact == "false":       # the same run unmasked sends them: the check can fail
            assert leaked(sent) == sorted(SECRETS)
            return
        assert leaked(sent) == []
        assert leaked(on_disk(gw.data_dir)) == []
        # the archive keeps the originals: recall returns what the model saw
        page = rt.tools.handle("tdai_read_cos", {"key": "call_env"}, "s1", "hermes-s1")
        assert leaked(page) == sorted(s for s in SECRETS if s in ENV_DUMP)
        rt.close()


def compaction_case(tmp_path, gw, redact="true"):
    rt, eng = make_engine(tmp_path, gateway_url=gw.url, redact=redact)
    conv = conversation(30, 3000, calls=2)
    conv[1]["tool_calls"][0]["function"]["arguments"] = json.dumps(
        {"path": "/srv/.env", "note": SECRETS["correcthorsebattery"]})
    conv[2]["content"] = ENV_DUMP + "\n" + conv[2]["content"]       # an old result: cut or summarised
    conv.append({"role": "user", "content": "now rotate " + SECRETS["ghp_R7tY2uI9oP4aS6dF1gH8jK3lZ5xC0vB2nM4q"]})
    conv.append({"role": "assistant", "content": "", "tool_calls": [{
        "id": "call_new", "type": "function", "function": {
            "name": "read_file", "arguments": json.dumps({"path": "/srv/key.pem"})}}]})
    conv.append({"role": "tool", "tool_call_id": "call_new", "content": PEM})
    eng.update_from_response({"prompt_tokens": 60_000})
    return rt, eng, conv, eng.compress(conv, current_tokens=60_000)


def test_compact_body_masked_and_the_kept_text_is_the_original(tmp_path):
    with FakeGateway() as gw:
        rt, eng, conv, out = compaction_case(tmp_path, gw)
        (body, _reply), = gw.compact_calls("hermes-s1")
        assert eng.get_status()["session_stats"]["gateway_compactions"] == 1
        assert leaked(json.dumps(body)) == [] and leaked(on_disk(gw.data_dir)) == []
        assert messages.validation_errors(out) == []
        # the current turn and the newest step came back as sent (masked): the model keeps
        # the text it was shown, byte for byte
        assert conv[-3] in out and conv[-2] in out and conv[-1] in out
        rt.close()


def test_compact_body_unmasked_when_redaction_is_off(tmp_path):
    with FakeGateway() as gw:
        rt, eng, conv, out = compaction_case(tmp_path, gw, redact="false")
        (body, _reply), = gw.compact_calls("hermes-s1")
        assert {"correcthorsebattery", "ghp_R7tY2uI9oP4aS6dF1gH8jK3lZ5xC0vB2nM4q",
                "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLez"} <= set(leaked(json.dumps(body)))
        rt.close()


def test_status_counts_masked_texts_per_conversation_never_the_secret(tmp_path):
    with FakeGateway() as gw:
        rt, eng = make_engine(tmp_path, gateway_url=gw.url)
        drive(HookHandlers(rt))
        assert rt.flush("s1", 10)
        record = rt.status_record()
        row = next(r for r in record.store.sessions if r.session == "s1")
        assert row.redacted >= 4          # the prompt, two results, the call's arguments
        text = render(record) + json.dumps(rt.status(), default=str)
        assert "masked" in render(record) and leaked(text) == []
        rt.close()
        page = report_figures(rt.store_dir, rt.settings, "s1")      # ``report``'s figures
        assert page["summary"]["texts_masked"] == row.redacted and leaked(json.dumps(page)) == []


def test_archive_keeps_originals_unless_asked_to_mask_at_rest(tmp_path):
    for at_rest in ("false", "true"):
        home = tmp_path / at_rest
        with FakeGateway() as gw:
            rt, eng = make_engine(home, gateway_url=gw.url, redact_archive=at_rest)
            drive(HookHandlers(rt))
            assert rt.flush("s1", 10)
            rt.close()
        conn = sqlite3.connect(str(rt.store_dir / "store.db"))
        rows = "\n".join(str(r) for t in ("archive", "outbox")
                         for r in conn.execute("SELECT * FROM %s" % t))
        conn.close()
        assert bool(leaked(rows)) == (at_rest == "false")


def test_masking_runs_on_the_sender_thread_never_the_hooks(tmp_path):
    threads = []

    def mask(text):
        threads.append(threading.get_ident())
        return strict(text)
    with FakeGateway() as gw:
        rt, eng = make_engine(tmp_path, gateway_url=gw.url)
        rt.client.redactor = Redactor(mask=mask)
        drive(HookHandlers(rt))         # the hooks return: nothing masked on their thread
        assert threading.get_ident() not in threads
        assert rt.flush("s1", 10)
        assert threads and threading.get_ident() not in threads
        assert leaked(sent_to_gateway(gw)) == []
        rt.close()
