"""Gateway session ids: one per conversation, stable for existing ones, within the Gateway's rules."""

import re

import pytest

from fakes.gateway import FakeGateway
from fakes.gateway.common import sanitise_session_id
from tencentdb_offload.memory_gateway.client import GatewayClient
from tencentdb_offload.memory_gateway.session_ids import gateway_session_id

GATEWAY_ID = re.compile(r"[A-Za-z0-9_.:-]{1,200}")      # the Gateway's rule (500) and ours (200)
IGNORED = re.compile(r"memory-.*-session-\d+")


def old_mapping(conversation):
    """The mapping of every version before this one (kept here to prove stability)."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "-", conversation or "default")[:180]
    safe = "hermes-" + re.sub("subagent", "sub-agent", safe, flags=re.I)
    if re.search(r"memory-.*-session-\d+", safe):
        safe = safe.replace("session", "sess")
    return safe


COLLIDED = [("chat:alice", "chat-alice", "chat/alice", "chat_alice", "chat alice"),
            ("日本", "中国", "--", "-"),
            ("a" * 180 + "x", "a" * 180 + "y", "a" * 181, "a" * 180),
            ("memory-x-session-1", "memory-x-sess-1"),
            ("subagent-1", "sub-agent-1", "SubAgent-1")]


@pytest.mark.parametrize("group", COLLIDED)
def test_ids_that_collided_before_are_distinct_now(group):
    ids = [gateway_session_id(c) for c in group]
    assert len(set(ids)) == len(group), ids
    assert len({old_mapping(c) for c in group}) < len(group)     # they did collide before
    # and on the Gateway's disk (':' and '_' share a directory there)
    assert len({sanitise_session_id(i) for i in ids}) == len(group)


WEIRD = ["", "default", "s1", "20250101_120000_abc123", "x" * 5000, "a:b:c", "\ud800lone",
         "memory-a-session-12", "memory-subagent-session-3", "..", ".", "-", "chat/../../etc",
         "SUBAGENT", "日本語のセッション" * 40, "memory-" + "x" * 200 + "-session-9"]


@pytest.mark.parametrize("conversation", WEIRD)
def test_every_id_is_one_the_gateway_accepts_and_does_not_ignore(conversation):
    gid = gateway_session_id(conversation)
    assert GATEWAY_ID.fullmatch(gid) and re.fullmatch(r"[A-Za-z0-9._-]+", gid), gid
    assert "subagent" not in gid.lower() and not IGNORED.search(gid), gid
    assert gid.startswith(("hermes-", "hermes.")) and gid == gateway_session_id(conversation)


@pytest.mark.parametrize("conversation", ["s1", "20250101_120000_abc123", "a" * 180, "x.y-z_0",
                                          "cron_job_20250101_120000", "room_" + "f" * 32])
def test_plain_ids_keep_the_id_every_earlier_version_gave_them(conversation):
    assert gateway_session_id(conversation) == old_mapping(conversation) == "hermes-" + conversation


def test_other_ids_are_readable_and_hashed():
    gid = gateway_session_id("agent:main:telegram:dm:12345")
    assert gid.startswith("hermes.agent-main-telegram-dm-12345.")
    assert re.fullmatch(r"[0-9a-f]{32}", gid.rsplit(".", 1)[1])
    assert gateway_session_id("") == gateway_session_id("default") == "hermes-default"


def test_distinct_conversations_get_distinct_gateway_sessions_on_the_fake():
    # the Gateway really keeps them apart: each pair lands in its own directory
    with FakeGateway(api_key="k") as gw:
        c = GatewayClient(gw.url, "k", "svc")
        for n, conv in enumerate(["chat:alice", "chat-alice", "chat/alice"]):
            pair = {"tool_name": "t", "tool_call_id": "c%d" % n, "params": {}, "result": conv,
                    "timestamp": "2026-01-01T00:00:00.000Z"}
            c.ingest(gateway_session_id(conv), [pair])
        seen = [[p["result"] for p in gw.ingested_pairs(gateway_session_id(conv))]
                for conv in ["chat:alice", "chat-alice", "chat/alice"]]
    assert seen == [["chat:alice"], ["chat-alice"], ["chat/alice"]]
