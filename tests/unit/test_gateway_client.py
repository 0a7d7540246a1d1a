"""GatewayClient against the fake Gateway over real sockets: every error path."""

import time

import pytest

from helpers import wait_for
from fakes.gateway import FakeGateway
from fakes.hostile import HostilePeer
from tencentdb_offload.memory_gateway.client import (BodyTooLarge, CircuitBreaker, GatewayClient,
                                              GatewayProtocolError,
                                              GatewayRejected, GatewayTimeout,
                                              GatewayUnavailable)

PAIR = {"tool_name": "read_file", "tool_call_id": "c1", "params": {"path": "/a"},
        "result": "x" * 300, "timestamp": "2026-11-30T00:00:00.000Z"}


@pytest.fixture
def gw():
    with FakeGateway(api_key="right-key") as g:
        yield g


def client(gw, key="right-key", **kw):
    kw.setdefault("ingest_timeout_ms", 2000)
    return GatewayClient(gw.url, key, "svc", breaker=CircuitBreaker(base_backoff=0.05), **kw)


def test_happy_path_and_headers(gw):
    c = client(gw)
    assert c.health()["status"] == "ok"
    assert c.ingest("hermes-s1", [PAIR], prompt="fix it") == {}
    rec = [r for r in gw.requests if r.path.endswith("/ingest")][-1]
    assert rec.headers["authorization"] == "Bearer right-key"
    assert rec.headers["x-tdai-service-id"] == "svc"
    assert gw.ingested_pairs("hermes-s1")[0]["tool_call_id"] == "c1"
    data = c.query_mmd("hermes-s1")
    assert "mmds" in data
    out = c.compact("hermes-s1", [{"role": "user", "content": "hi"}], ratio=0.1,
                    context_window=1000, total_tokens=50)
    assert out["report"]["resolvedLevel"] == "fastpath"


def test_connection_reused(gw):
    c = client(gw)
    for _ in range(5):
        c.query_mmd("hermes-s1")
    conn = c._conns.get()
    assert conn is not None and conn.sock is not None and len(c._conns) == 1


def test_wrong_key_is_config_problem_not_outage(gw):
    c = client(gw, key="wrong")
    with pytest.raises(GatewayRejected) as err:
        c.ingest("hermes-s1", [PAIR])
    assert err.value.http_status == 401 and err.value.code == 401 and err.value.config_problem
    assert err.value.auth_refused and not err.value.outage
    assert c.available and "401" in c.config_error
    assert "wrong" not in str(err.value) and "wrong" not in repr(c.status())


def test_validation_400(gw):
    c = client(gw)
    with pytest.raises(GatewayRejected) as err:
        c.ingest("bad id with spaces", [PAIR])
    assert err.value.http_status == 400 and not err.value.retryable and not err.value.auth_refused


def test_refused_opens_breaker_then_fails_fast_then_recovers(gw):
    c = client(gw)
    gw.set_fault("refuse")
    with pytest.raises(GatewayUnavailable):
        c.ingest("hermes-s1", [PAIR])
    assert not c.available
    gw.clear_fault()        # the Gateway is back: only the open breaker keeps the call off it
    sent = len(gw.requests)
    with pytest.raises(GatewayUnavailable, match="circuit open"):
        c.ingest("hermes-s1", [PAIR])
    assert len(gw.requests) == sent                     # failed fast: nothing was sent
    gw.set_fault("refuse")
    assert wait_for(c.breaker.probe_due)
    assert not c.probe()                                # still refused: stays open
    gw.clear_fault()
    time.sleep(0.2)
    assert c.probe() and c.available
    assert c.ingest("hermes-s1", [PAIR]) == {}


def test_hang_times_out(gw):
    c = client(gw, ingest_timeout_ms=200)
    gw.set_fault("hang", hang_seconds=5)
    t = time.perf_counter()
    with pytest.raises(GatewayTimeout):
        c.query_mmd("hermes-s1")
    # Bounded by the 0.2 s timeout, not by the 5 s hang: the bound is 10x the timeout so a
    # loaded machine never fails it, and still well below the hang.
    assert time.perf_counter() - t < 2
    assert not c.available
    gw.clear_fault()


@pytest.mark.parametrize("kind,exc", [("5xx", GatewayRejected), ("409", GatewayRejected),
                                      ("reset", GatewayUnavailable),
                                      ("garbage", GatewayProtocolError)])
def test_fault_kinds(gw, kind, exc):
    c = client(gw)
    gw.set_fault(kind)
    with pytest.raises(exc) as err:
        c.ingest("hermes-s1", [PAIR])
    if kind in ("5xx", "409"):
        assert err.value.retryable and not err.value.config_problem
        assert err.value.outage == (kind == "5xx")


def test_wrong_shape_compact(gw):
    c = client(gw)
    gw.set_fault("wrong_shape", paths=("/v2/offload/compact",))
    with pytest.raises(GatewayProtocolError):
        c.compact("hermes-s1", [{"role": "user", "content": "x"}], ratio=1, context_window=10,
                  total_tokens=5)


def test_body_limit_checked_before_sending(gw):
    c = client(gw, body_limit=20_000)
    big = dict(PAIR, result="y" * 50_000)
    before = len(gw.requests)
    with pytest.raises(BodyTooLarge):
        c.ingest("hermes-s1", [big])
    assert len(gw.requests) == before and c.available


def test_over_gateway_limit_resets(tmp_path):
    with FakeGateway(body_limit=10_000) as g:
        c = GatewayClient(g.url, "k", "svc", body_limit=10**7)
        with pytest.raises(GatewayUnavailable) as err:
            c.ingest("hermes-s1", [dict(PAIR, result="z" * 50_000)])
        assert err.value.body_bytes > 50_000


def test_read_ref_404_means_not_supported(gw):
    c = client(gw)
    assert c.read_ref("hermes-s1", "offload/hermes-s1/refs/c1.md") is None
    assert c.read_ref_supported is False
    n = len(gw.requests)
    assert c.read_ref("hermes-s1", "offload/x/refs/y.md") is None
    assert len(gw.requests) == n          # remembered: not asked again


def test_close_closes_connections_of_every_thread():
    """A runtime that closes must not leave kept-alive sockets of finished threads behind
    (seen under the messaging gateway: more Gateway connections than threads)."""
    import os
    import threading

    def open_fds():
        return len(os.listdir("/proc/self/fd"))

    with FakeGateway() as gw:
        c = GatewayClient(gw.url, "", "svc")
        before = open_fds()
        ready = threading.Barrier(7)            # all six hold their connection at once

        def call():
            c.health(force=True)
            ready.wait(10)

        threads = [threading.Thread(target=call) for _ in range(6)]
        for t in threads:
            t.start()
        ready.wait(10)
        assert open_fds() >= before + 6          # one kept-alive socket per thread
        for t in threads:
            t.join()
        c.close()                                # (the fake's server side closes on EOF)
        assert wait_for(lambda: open_fds() <= before)


def test_connections_of_finished_threads_do_not_pile_up():
    import os
    import threading

    with FakeGateway() as gw:
        c = GatewayClient(gw.url, "", "svc")
        c.health(force=True)
        before = len(os.listdir("/proc/self/fd"))
        for _ in range(20):
            t = threading.Thread(target=c.health, kwargs={"force": True})
            t.start()
            t.join()
        c.health(force=True)
        assert wait_for(lambda: len(os.listdir("/proc/self/fd")) <= before + 3)
        c.close()


# -- a refusal inside a 200 is judged by the Gateway's codes, not by HTTP ranges ----------

@pytest.mark.parametrize("code,retry,config,auth,outage", [
    (409, True, False, False, False),     # lock conflict: try again
    (503, True, False, False, True),      # storage unavailable
    (401, False, True, True, False),      # key refused
    (400, False, True, False, False),     # validation
    (404, True, False, False, False),     # not a Gateway code: kept and retried, not dropped
    (422, True, False, False, False),
    (1, True, False, False, False),
    ("E42", True, False, False, False)])
def test_codes_in_a_200_reply_are_judged_by_the_gateway_table(code, retry, config, auth, outage):
    reply = {"code": code, "message": "no", "request_id": "req-1"}
    with HostilePeer({"/v2/offload/ingest": ("json", reply)}) as peer:
        c = GatewayClient(peer.url, "k", "svc", breaker=CircuitBreaker(base_backoff=0.05))
        with pytest.raises(GatewayRejected) as err:
            c.ingest("hermes-s1", [PAIR])
    e = err.value
    assert e.http_status == 200 and e.code == (code if isinstance(code, int) else None)
    assert (e.retryable, e.config_problem, e.auth_refused, e.outage) == (retry, config, auth, outage)
    assert c.available == (not outage)                  # only an outage opens the breaker
    assert "HTTP 200" not in str(e) and "Gateway code" in str(e)
