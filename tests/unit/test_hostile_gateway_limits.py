"""A Gateway (or a proxy before it) that lies about sizes and failures: the wait stays one
deadline, the breaker learns an outage, rows are split rather than resent or dropped, and a
reply carries only what a compaction may write."""

import json
import time

import pytest

from fakes.hostile import HostilePeer, envelope
from tencentdb_offload.context import messages
from tencentdb_offload.context.tokens import Calibrator
from tencentdb_offload.hooks import HookHandlers
from tencentdb_offload.memory_gateway.client import (CircuitBreaker, GatewayClient,
                                                     GatewayError, GatewayRejected)
from tencentdb_offload.memory_gateway.compaction import GatewayCompactor
from tencentdb_offload.memory_gateway.transport import BaseURL

from helpers import conversation, make_engine, wait_for

COMPACT = "/v2/offload/compact"
INGEST = "/v2/offload/ingest"


def test_a_late_reset_costs_one_deadline_and_opens_the_breaker():
    # a reset after a large body is how the Gateway refuses its size, but only at once; one
    # that comes near the timeout is a crash: no second full wait, and the breaker learns it
    with HostilePeer({COMPACT: ("late_reset", 0.9)}) as peer:
        c = GatewayClient(peer.url, "k", "svc", breaker=CircuitBreaker(), timeout_ms=1000)
        t = time.monotonic()
        with pytest.raises(GatewayError):
            GatewayCompactor(c).run("hermes-s1", conversation(12, 20_000), target_tokens=20_000,
                                    context_length=64_000, calibrator=Calibrator(),
                                    overhead_estimate=0)
        took = time.monotonic() - t
        compacts = [r for r in peer.requests if r[1] == COMPACT]
    # one request, and less than two deadlines (1 s each): not a tight figure a loaded
    # machine fails, still no second full wait
    assert took < 2.0 and len(compacts) == 1, (took, len(compacts))
    assert not c.breaker.allow()


def test_a_quick_reset_of_a_large_body_is_retried_smaller_within_the_deadline():
    with HostilePeer({COMPACT: ("reset_over", 200_000)}) as peer:
        c = GatewayClient(peer.url, "k", "svc", breaker=CircuitBreaker(), timeout_ms=5000)
        msgs = conversation(8, 40_000)
        with pytest.raises(GatewayError):   # (its success here is an empty envelope)
            GatewayCompactor(c).run("hermes-s1", msgs, target_tokens=20_000,
                                    context_length=64_000, calibrator=Calibrator(),
                                    overhead_estimate=0)
        sizes = [b for (m, p, _h), b in zip(peer.requests, peer.bodies) if p == COMPACT]
    assert len(sizes) == 2 and sizes[1] < sizes[0]
    assert c.breaker.allow(), "a size refusal is not an outage"


def _queued(tmp_path, url, n, size):
    rt, eng = make_engine(tmp_path, gateway_url=url, api_key="k1")
    hooks = HookHandlers(rt)
    for i in range(n):
        hooks.post_tool_call(tool_name="cat", args={"i": i}, result=("%d " % i) * (size // 3),
                             session_id="s1", tool_call_id="c%d" % i)
    assert rt.writer.flush(10)
    return rt


def test_an_ingest_batch_the_gateway_resets_for_its_size_is_split(tmp_path):
    with HostilePeer({INGEST: ("reset_over", 100_000)}) as peer:
        rt = _queued(tmp_path, peer.url, 4, 45_000)     # a batch of ~180 KB; each row fits
        assert wait_for(lambda: rt.store.stats().outbox_backlog == 0, 10)
        sizes = [b for (m, p, _h), b in zip(peer.requests, peer.bodies) if p == INGEST]
        dead = rt.store.stats().outbox_dead
        rt.close()
    assert dead == 0
    assert len(sizes) <= 6, sizes            # split once, not resent whole again and again
    assert max(sizes[1:]) <= 100_000


@pytest.mark.parametrize("status", [400, 405, 429])
def test_a_proxy_page_never_marks_rows_refused_for_good(tmp_path, status):
    page = b"<html><body>%d from nginx</body></html>" % status
    with HostilePeer({INGEST: ("status", (status, page))}) as peer:
        rt = _queued(tmp_path, peer.url, 3, 600)
        assert wait_for(lambda: any(r[1] == INGEST for r in peer.requests), 5)
        rt.writer.flush(5)
        dead = rt.store.stats().outbox_dead
        backlog = rt.store.stats().outbox_backlog
        rt.close()
    assert dead == 0 and backlog == 3


def test_a_413_splits_and_shrinks_instead_of_dropping(tmp_path):
    page = b"<html>413 Request Entity Too Large</html>"
    big = ("status", (413, page))
    with HostilePeer({INGEST: ("sequence", [big, big, big, big, ("json", envelope({}))])}) as peer:
        rt = _queued(tmp_path, peer.url, 2, 30_000)
        assert wait_for(lambda: rt.store.stats().outbox_backlog == 0, 10)
        dead = rt.store.stats().outbox_dead
        rt.close()
    assert dead == 0


@pytest.mark.parametrize("code", [False, 0.0, "0", None])
def test_only_the_integer_0_is_success(code):
    with HostilePeer({INGEST: ("json", {"code": code, "data": {}})}) as peer:
        c = GatewayClient(peer.url, "k", "svc", breaker=CircuitBreaker())
        with pytest.raises(GatewayRejected):
            c.ingest("hermes-s1", [])


BAD_CONTENT = [[{"type": "image_url", "image_url": {"url": "http://example.invalid/p.png"}}],
               [{"type": "banana"}], "lone \ud800 surrogate", 42]


@pytest.mark.parametrize("content", BAD_CONTENT, ids=["image", "unknown", "surrogate", "number"])
def test_a_result_replaced_by_anything_but_text_is_refused(tmp_path, content):
    def echo_with(body):
        sent = json.loads(body)["messages"]
        for m in sent:
            if m.get("role") == "tool":
                m["content"] = content
        return envelope({"messages": sent, "report": {"level": "mild"}})
    conv = conversation(10, 6000)
    with HostilePeer({COMPACT: ("echo", echo_with)}) as peer:
        rt, eng = make_engine(tmp_path, gateway_url=peer.url, timeout_ms="3000")
        out = eng.compress(conv, current_tokens=60_000)
        assert any(r[1] == COMPACT for r in peer.requests)
        rt.close()
    for m in out:
        if messages.role(m) == "tool":
            assert isinstance(m["content"], str)
            m["content"].encode("utf-8")
    assert eng.get_status()["session_stats"]["last_compaction"]["route"] == "local"


def test_a_gateway_path_with_other_characters_is_sent_percent_encoded():
    assert BaseURL("http://127.0.0.1:8420/gätewäy/").prefix == "/g%C3%A4tew%C3%A4y"
    with HostilePeer() as peer:
        c = GatewayClient(peer.url + "/gätewäy", "k", "svc", breaker=CircuitBreaker())
        c.ingest("hermes-s1", [])
        assert peer.requests[-1][1] == "/g%C3%A4tew%C3%A4y" + INGEST


def test_a_compact_reply_far_larger_than_the_request_is_not_read():
    flood = json.dumps(envelope({"messages": [{}] * 2_000_000, "report": {}})).encode()
    with HostilePeer({COMPACT: ("raw", flood)}) as peer:
        c = GatewayClient(peer.url, "k", "svc", breaker=CircuitBreaker())
        with pytest.raises(Exception) as err:
            c.compact("hermes-s1", [{"role": "user", "content": "hi"}], ratio=1.0,
                      context_window=64_000, total_tokens=60_000)
    assert "larger than" in str(err.value)


def test_prompt_boundaries_stay_bounded_across_many_conversations(tmp_path, monkeypatch):
    from tencentdb_offload.runtime import ingest
    monkeypatch.setattr(ingest, "BOUNDARY_KEEP", 50)
    with HostilePeer() as peer:
        rt, eng = make_engine(tmp_path, gateway_url=peer.url, api_key="k1")
        hooks = HookHandlers(rt)
        for n in range(120):
            hooks.pre_llm_call(session_id="conv-%d" % n, user_message="task %d, please" % n,
                               conversation_history=[], is_first_turn=True)
        assert rt.writer.flush(10) and rt.flush(None, 20)
        kept = dict(rt.worker._boundary)
        rt.close()
    assert len(kept) == 50, len(kept)       # every prompt was sent; the newest 50 kept
