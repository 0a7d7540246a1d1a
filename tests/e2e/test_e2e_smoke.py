"""Smoke test of the e2e harness itself: the real ``hermes chat`` CLI with the BUILT-IN
compressor (no plugin) against the fake LLM, two turns joined by ``--resume``.

If this fails, the harness or the installed Hermes changed, not the plugin.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402
from tests.fakes.fake_llm import FakeLLM, prompt_tokens  # noqa: E402

HERMES_VERSION = harness.hermes_version() or "unknown"

if not harness.hermes_bin().exists():  # pragma: no cover - wrong interpreter
    pytest.skip(f"hermes CLI not found next to {sys.executable}; run tests/e2e with the "
                "Hermes venv's python", allow_module_level=True)


@pytest.mark.parametrize("hermes", [HERMES_VERSION], ids=lambda v: f"hermes-{v}")
def test_builtin_compressor_roundtrip(tmp_path, hermes):
    (path, needle), = harness.make_text_files(tmp_path / "files", 1, tag="smoke")
    with FakeLLM() as llm:
        home = harness.make_home(tmp_path, llm.url, engine="compressor", enabled_plugins=())
        assert not (home / "plugins" / harness.PLUGIN_NAME).exists()
        conv = harness.Conversation(llm, home)

        t1 = conv.say(f"DO read {path}")
        # Hermes prints the session id on stderr, the answer on stdout.
        assert f"session_id: {t1.result.session_id}" in t1.result.stderr, t1.result.describe()
        assert "done: read 1 file(s)" in t1.result.stdout, t1.result.describe()

        issued = llm.tool_calls_issued
        assert [(n, a) for _, n, a in issued] == [("read_file", {"path": path})], issued
        call_id = issued[0][0]
        assert [e.command[0] for e in t1.main] == ["read", "read"], conv.summary()
        first, second = t1.main
        assert [m["role"] for m in first.messages] == ["system", "user"]
        assert first.messages[-1]["content"].startswith(f"DO read {path}")
        tool_msgs = [m for m in second.messages if m["role"] == "tool"]
        assert [m["tool_call_id"] for m in tool_msgs] == [call_id], second.messages
        assert needle in tool_msgs[0]["content"], "read_file result lacks the needle"
        assert first.body.get("stream") is True, "Hermes is expected to stream"

        t2 = conv.say("hello again", expect_ok=True)
        assert t2.result.session_id == t1.result.session_id  # no compaction -> same id
        assert "ok: hello again" in t2.result.stdout, t2.result.describe()
        (req,) = t2.main
        roles = [m["role"] for m in req.messages]
        assert roles == ["system", "user", "assistant", "tool", "assistant", "user"], roles
        assert needle in harness.request_text(req.body), "--resume did not restore turn 1"

    for n, e in enumerate(llm.exchanges):
        harness.assert_valid_sequence(e.messages, f"request #{n}")
        assert e.prompt_tokens == prompt_tokens(e.body)
    for e in conv.main_exchanges:
        names = harness.tool_names(e.body)
        assert "read_file" in names and "tdai_read_cos" not in names, names
        assert harness.NOTICE_MARKER not in harness.request_text(e.body)
    # the validator is not vacuous
    assert harness.sequence_problems(conv.main_exchanges[0].messages + [{"role": "user", "content": "x"}])


def test_wire_validator_and_token_count():
    """The validator and the fake's token count used by every e2e assertion."""
    from tests.fakes.fake_llm import parse_command

    ok = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "u"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "read_file", "arguments": "{}"}},
            {"id": "b", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "a", "content": "x"},
        {"role": "tool", "tool_call_id": "b", "content": "y"},
        {"role": "assistant", "content": "done"},
        {"role": "user", "content": "next"},
    ]
    assert harness.sequence_problems(ok) == []
    # consecutive assistant turns are valid (the hosts merge them; providers accept them)
    assert harness.sequence_problems(ok[:6] + [{"role": "assistant", "content": "more"}]) == []
    bad_cases = {
        "empty": [],
        "late system": ok[:2] + [{"role": "system", "content": "s2"}],
        "orphan tool": ok[:2] + [{"role": "tool", "tool_call_id": "a", "content": "x"}],
        "unanswered call": ok[:4] + ok[5:],
        "wrong id": ok[:3] + [{"role": "tool", "tool_call_id": "zz", "content": "x"}] + ok[4:],
        "answered twice": ok[:5] + [ok[4]] + ok[5:],
        "two users": ok + [{"role": "user", "content": "again"}],
        "text between call and result": ok[:3] + [{"role": "user", "content": "?"}] + ok[3:],
        "anthropic unanswered": [{"role": "user", "content": "u"}, {"role": "assistant", "content": [
            {"type": "tool_use", "id": "t1", "name": "x", "input": {}}]}, {"role": "user", "content": "no"}],
        "anthropic stray result": [{"role": "user", "content": "u"}, {"role": "assistant", "content": "hi"},
                                   {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t9", "content": "r"}]}],
    }
    for name, msgs in bad_cases.items():
        assert harness.sequence_problems(msgs), f"validator accepted: {name}"
    anthropic_ok = [{"role": "user", "content": "u"},
                    {"role": "assistant", "content": [{"type": "text", "text": "t"},
                                                      {"type": "tool_use", "id": "t1", "name": "x", "input": {}}]},
                    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "r"}]}]
    assert harness.sequence_problems(anthropic_ok) == []

    body = {"messages": [{"role": "user", "content": "abcde"},
                         {"role": "assistant", "content": [{"type": "text", "text": "xyz"}],
                          "tool_calls": [{"function": {"name": "nm", "arguments": "{}"}}]}],
            "tools": [{"type": "function"}]}
    chars = 5 + 3 + 2 + 2 + len('[{"type": "function"}]')
    assert prompt_tokens(body) == -(-chars // 4)

    assert parse_command("DO read /a /b\n\n<current_task_context>x</current_task_context>") == ("read", ["/a", "/b"])
    assert parse_command("[tencentdb-offload] notice\n\nDO recall call_3") == ("recall", ["call_3"])
    assert parse_command("HEARTBEAT check\n\n%%{ \"taskGoal\": \"DO read /x\" }%%") == ("text", [])
