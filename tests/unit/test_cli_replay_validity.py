"""``replay`` judges requests with the product's one validator (``messages.validation_errors``),
and two assistant messages in a row are judged as the hosts treat them: Hermes 0.19/0.22 merge
them before every provider call (``repair_message_sequence`` pass 0, tool calls unioned), the
Anthropic adapter merges them on 0.17, OpenAI-compatible APIs accept them. A 0.22 session after a
manual /compress holds such a pair; replay must not call it invalid."""

from __future__ import annotations

import json

from tencentdb_offload.context import messages

from helpers import run_cli


def call(cid: str) -> dict:
    return {"id": cid, "type": "function", "function": {"name": "read_file", "arguments": "{}"}}


SESSION = [
    {"role": "user", "content": "fix the retry loop"},
    {"role": "assistant", "content": "", "tool_calls": [call("c1")]},
    {"role": "tool", "tool_call_id": "c1", "content": "def retry(): ..." * 50},
    {"role": "assistant", "content": "[context compacted by /compress]"},
    {"role": "assistant", "content": "The loop never backs off; here is the fix."},
    {"role": "user", "content": "thanks, now the docs"},
    {"role": "assistant", "content": "Done."},
]


def test_consecutive_assistant_messages_are_a_valid_request():
    assert messages.validation_errors(SESSION) == []


def test_replay_does_not_call_a_valid_session_invalid(tmp_path):
    path = tmp_path / "session.json"
    path.write_text(json.dumps(SESSION))
    proc = run_cli(["replay", str(path), "--json"], env={
        "HERMES_HOME": str(tmp_path / "home"), "TENCENTDB_OFFLOAD_GATEWAY_URL": "off"})
    summary = json.loads(proc.stdout)["summary"]
    assert summary["invalid_requests"] == 0, summary["invalid_examples"]
    assert proc.returncode == 0


def test_the_validator_still_catches_what_no_host_repairs():
    assert messages.validation_errors([{"role": "user", "content": "a"},
                                {"role": "assistant", "content": "", "tool_calls": [call("c9")]},
                                {"role": "user", "content": "b"}])
    assert messages.validation_errors([{"role": "user", "content": "a"},
                                {"role": "tool", "tool_call_id": "zz", "content": "x"}])
