"""One conversation's bad reply never stops delivery for the others (issue 27 item 7).

A reply nested deeper than the JSON parser can follow is a broken reply for that batch: the
other conversations are delivered in the same passes, and the bad batch waits with backoff
instead of being resent every second.
"""

import time

import tencentdb_offload as plugin
from fakes.hostile import HostilePeer
from tencentdb_offload.hooks import HookHandlers
from tencentdb_offload.memory_gateway.client import (CircuitBreaker, GatewayClient,
                                                     GatewayProtocolError)

from helpers import env_for, wait_for

INGEST = "/v2/offload/ingest"
NESTED = b"[" * 200_000 + b"]" * 200_000


def test_a_deeply_nested_reply_is_a_protocol_error():
    with HostilePeer({INGEST: ("raw", NESTED)}) as peer:
        c = GatewayClient(peer.url, "k", "svc", breaker=CircuitBreaker(), ingest_timeout_ms=2000)
        try:
            c.ingest("hermes-s1", [])
        except GatewayProtocolError as exc:
            assert "nested" in str(exc)
        else:
            raise AssertionError("a nested reply was accepted")


def test_one_conversations_bad_reply_delays_only_that_conversation(tmp_path):
    with HostilePeer({INGEST: ("for_session", ("bad", ("raw", NESTED)))}) as peer:
        rt = plugin.build_runtime(env=env_for(tmp_path, gateway_url=peer.url, api_key="k"))
        try:
            hooks = HookHandlers(rt)
            for session in ("bad", "good1", "good2"):
                for i in range(3):
                    hooks.post_tool_call(tool_name="cat", args={"i": i}, result="text %d" % i,
                                         session_id=session, tool_call_id="%s-%d" % (session, i))
            assert rt.writer.flush(10)
            started = time.monotonic()
            rt.worker.wake()
            assert wait_for(lambda: rt.store.outbox.backlog("good1") == rt.store.outbox.backlog("good2") == 0, 10)
            time.sleep(max(0.0, 6.0 - (time.monotonic() - started)))
            tries = sum(1 for s in peer.sessions if "bad" in s)
            assert rt.store.outbox.backlog("bad") == 3             # kept, not dropped
            assert rt.store.stats().outbox_dead == 0
            assert 1 <= tries <= 4, "the bad batch was sent %d times in 6 s" % tries
            assert "ingest pass failed" not in rt.worker.last_error
        finally:
            rt.close()
