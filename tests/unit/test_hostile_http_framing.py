"""A peer whose HTTP framing is odd but legal, or hostile: the client reads what HTTP allows,
answers within its deadline, and fails only with its own typed errors."""

import time

import pytest

from fakes.hostile import HostilePeer
from tencentdb_offload.memory_gateway.client import (CircuitBreaker, GatewayClient,
                                                     GatewayError, GatewayUnavailable)

INGEST = "/v2/offload/ingest"
OK = b'{"code":0,"message":"ok","data":{}}'


def client(url, timeout_ms=3000):
    return GatewayClient(url, "k", "svc", timeout_ms=timeout_ms, ingest_timeout_ms=timeout_ms,
                         breaker=CircuitBreaker(base_backoff=0.01))


def reply(status_line, body=b"", extra=""):
    return ("%s\r\nContent-Length: %d\r\n%s\r\n" % (status_line, len(body), extra)).encode(
        "latin-1") + body


def ingest(c):
    return c.ingest("hermes-s1", [], prompt="hello")


# -- a status line int() refuses is a broken reply, not a crash ---------------------------------

@pytest.mark.parametrize("status", [b"\xb200", b"9" * 5000])
def test_a_status_python_reads_as_digits_but_int_refuses_is_a_gateway_error(status):
    wire = b"HTTP/1.1 " + status + b" OK\r\nContent-Length: 2\r\n\r\n{}"
    with HostilePeer({INGEST: ("wire", wire), "/health": ("wire", wire)}) as peer:
        c = client(peer.url)
        with pytest.raises(GatewayUnavailable, match="did not answer in HTTP"):
            ingest(c)
        assert c.probe() is False       # the background probe says "down", it does not raise
        assert c.breaker.state == "open"
