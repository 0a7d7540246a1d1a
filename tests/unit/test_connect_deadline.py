"""Connecting is within the call's one deadline, however many addresses the host name has."""

import socket
import time

import pytest

from tencentdb_offload.memory_gateway.client import (CircuitBreaker, GatewayClient,
                                                     GatewayTimeout)


def _silent(host, port=0):
    """A listener whose accept queue is full: the kernel drops further SYNs, so a connect to
    it waits (as to a host behind a firewall that drops packets). Returns (port, sockets)."""
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        srv.bind((host, port))
    except OSError:
        srv.close()
        pytest.skip("%s is not a loopback address here" % host)
    srv.listen(0)
    held = [srv]
    port = srv.getsockname()[1]
    for _ in range(4):
        c = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        c.setblocking(False)
        try:
            c.connect((host, port))
        except BlockingIOError:
            pass
        held.append(c)
    time.sleep(0.2)
    return port, held


def test_a_name_with_two_silent_addresses_costs_one_deadline(monkeypatch):
    port, held = _silent("127.0.0.1")
    held += _silent("127.0.0.2", port)[1]
    real = socket.getaddrinfo

    def resolve(host, *args, **kw):     # the resolver's answer: an A record for each address
        if host == "gateway.test":
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (ip, port))
                    for ip in ("127.0.0.1", "127.0.0.2")]
        return real(host, *args, **kw)

    monkeypatch.setattr(socket, "getaddrinfo", resolve)
    try:
        c = GatewayClient("http://gateway.test:%d" % port, "k", "svc", ingest_timeout_ms=1500,
                          breaker=CircuitBreaker(base_backoff=0.01))
        started = time.monotonic()
        with pytest.raises(GatewayTimeout):
            c.ingest("hermes-s1", [], prompt="hello")
        took = time.monotonic() - started
    finally:
        for s in held:
            s.close()
    assert took < 2.5, took         # one deadline (1.5 s), not one per address (3 s)
