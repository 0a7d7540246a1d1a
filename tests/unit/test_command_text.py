"""What the slash command and the operator commands say: the truth about flush, which
sessions are held, why a manual /compress changed nothing, and never a peer's terminal
control characters."""

from __future__ import annotations

import json
import time

from fakes.gateway import FakeGateway
from fakes.hostile import HostilePeer, envelope
from tencentdb_offload.archive.store import Store
from tencentdb_offload.host.command import make_command
from tencentdb_offload.status.render import explain_unchanged
from tencentdb_offload.hooks import HookHandlers

from helpers import conversation, make_engine, run_cli

EVIL = "ok\x1b[2J\x1b[H$ sudo rm -rf ~\x9b31m\u202eevil\x07"
CONTROLS = ("\x1b", "\x9b", "\u202e", "\x07")


def clean(text: str) -> bool:
    return not any(c in text for c in CONTROLS)


def test_flush_with_the_gateway_off_does_not_claim_delivery(tmp_path):
    rt, _eng = make_engine(tmp_path)
    try:
        text = make_command(rt)("flush")
        assert "delivered" not in text and "the Gateway is off" in text
    finally:
        rt.close()


def test_flush_and_reclaim_without_a_store_say_so(tmp_path):
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "tencentdb-offload").write_text("a file where the store goes")
    rt, _eng = make_engine(tmp_path)
    try:
        HookHandlers(rt).post_tool_call(tool_name="t", args={}, session_id="s1",
                                        tool_call_id="c1", result="kept in memory")
        cmd = make_command(rt)
        flushed = cmd("flush")
        assert flushed.startswith("archive writes NOT saved yet (") and "saved to disk" not in flushed
        assert "cannot create" in flushed
        reclaimed = cmd("reclaim")
        assert reclaimed.startswith("nothing deleted: the archive is unavailable (cannot create")
    finally:
        rt.close()


def test_flush_with_the_gateway_down_says_what_waits(tmp_path):
    with FakeGateway(api_key="k") as gw:
        rt, _eng = make_engine(tmp_path, gateway_url=gw.url, api_key="k")
        try:
            cmd = make_command(rt)
            gw.set_fault("refuse")
            HookHandlers(rt).post_tool_call(tool_name="read_file", args={"p": 1}, result="r" * 50,
                                            session_id="s1", tool_call_id="c1")
            text = cmd("flush")
            assert text.startswith("outbox not delivered: ") and "waiting" in text, text
            gw.clear_fault()
            assert cmd("health").startswith("Gateway up")      # closes the breaker at once
            assert cmd("flush") == "outbox delivered: nothing waiting for the Gateway"
        finally:
            rt.close()


def test_status_names_the_sessions_held_in_memory(tmp_path):
    rt, eng = make_engine(tmp_path, session="chat-main")
    try:
        hooks = HookHandlers(rt)
        hooks.post_tool_call(tool_name="read_file", args={}, result="x", session_id="chat-main",
                             tool_call_id="c1")
        hooks.post_tool_call(tool_name="read_file", args={}, result="y", session_id="subagent-7",
                             tool_call_id="c2")
        text = make_command(rt)("status")
        assert "sessions in memory: 2" in text      # the engine's unbound placeholder is none
        assert ": subagent-7 (1 tool result), chat-main (1 tool result)\n" in text
        assert "default" not in text
        assert "sub-agent" in text
    finally:
        rt.close()


def test_the_reason_a_manual_compress_changed_nothing():
    text = explain_unchanged(30_811, 32_000, 48_000, 35)
    assert "already under the target of 32,000 tokens by 1,189" in text and "35 messages" in text
    assert "48,000" in text
    over = explain_unchanged(40_000, 32_000, 48_000, 3)
    assert "8,000 tokens over the target" in over and "protected" in over


def test_a_gateways_control_characters_never_reach_the_slash_command(tmp_path):
    health = ("json", {"status": EVIL, "version": EVIL})
    with HostilePeer({"/health": health}) as peer:
        rt, eng = make_engine(tmp_path, gateway_url=peer.url)
        try:
            cmd = make_command(rt)
            for sub in ("health", "status", "flush"):
                out = cmd(sub)
                assert clean(out), (sub, out)
            assert "sudo rm" in cmd("health")          # the text stays, its controls go
        finally:
            rt.close()


def test_stored_peer_text_is_shown_without_controls_by_status_and_doctor(tmp_path):
    home = tmp_path / "home"
    st = Store(home / "tencentdb-offload")
    st.transaction([Store.op_event("s\x1b[1m", "compaction", {
        "path": "gateway", "level": EVIL, "tokens_before": 9, "tokens_after": 4, "archived": 1,
        "error": "Gateway said " + EVIL}, time.time())])
    st.close()
    e = {"HERMES_HOME": str(home)}
    with HostilePeer({"/health": ("json", {"status": "ok", "version": EVIL}),
                      "/v2/offload/query-mmd": ("json", envelope({"items": []}))}) as peer:
        e["TENCENTDB_OFFLOAD_GATEWAY_URL"] = peer.url
        for args in (["status"], ["doctor", "--timeout", "2"], ["doctor", "--json", "--timeout", "2"]):
            proc = run_cli(args, env=e)
            assert clean(proc.stdout) and clean(proc.stderr), (args, proc.stdout)
            if args == ["status"]:
                assert "sudo rm" in proc.stdout
            else:
                assert "sudo rm" in (json.loads(proc.stdout)["checks"] if "--json" in args else
                                     [proc.stdout]).__str__()
