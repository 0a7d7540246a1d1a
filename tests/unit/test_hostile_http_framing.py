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


# -- interim and bodiless replies ------------------------------------------------------------

@pytest.mark.parametrize("interim", [
    b"HTTP/1.1 100 Continue\r\n\r\n",
    b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n",
    b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 102 Processing\r\n\r\n"])
def test_interim_replies_before_the_answer_are_skipped(interim):
    # HTTP: a client must read 1xx replies before the final one; taking the 100 as the answer
    # loses the Gateway's real one (its rows would be sent, and stored, twice)
    with HostilePeer({INGEST: ("wire", interim + reply("HTTP/1.1 200 OK", OK))}) as peer:
        c = client(peer.url)
        assert ingest(c) == {}
        assert ingest(c) == {}          # and the connection was left at the reply's end
    assert len(peer.requests) == 2


@pytest.mark.parametrize("status_line", [b"HTTP/1.1 204 No Content", b"HTTP/1.1 304 Not Modified"])
def test_a_reply_without_a_body_does_not_wait_for_the_deadline(status_line):
    # no Content-Length, the connection kept open: 204/304 end at their headers
    with HostilePeer({INGEST: ("wire", status_line + b"\r\n\r\n")}) as peer:
        c = client(peer.url, timeout_ms=5000)
        started = time.monotonic()
        with pytest.raises(GatewayError) as err:
            ingest(c)
        took = time.monotonic() - started
    assert took < 2.0, took
    assert "within" not in str(err.value)       # not reported as a timeout


def test_switching_protocols_is_not_http_we_read():
    wire = b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n\x81\x05hello"
    with HostilePeer({INGEST: ("wire", wire)}) as peer:
        with pytest.raises(GatewayUnavailable, match="101"):
            ingest(client(peer.url))


# -- a redirect or a proxy's page is named for what it is -------------------------------------

MOVED = reply("HTTP/1.1 301 Moved Permanently", b"<html>moved</html>",
              "Location: https://user:pw@gw.example:8443/offload?token=t0k\r\n")


def test_a_redirect_is_named_with_where_it_points_and_rows_wait():
    with HostilePeer({INGEST: ("wire", MOVED), "/health": ("wire", MOVED)}) as peer:
        c = client(peer.url)
        with pytest.raises(GatewayError) as err:
            ingest(c)
        with pytest.raises(GatewayError) as health:
            c.health(force=True)
    for text in (str(err.value), str(health.value)):
        assert "redirect to https://gw.example:8443/offload" in text, text
        assert "pw" not in text and "t0k" not in text      # never its credentials or query
    assert "health answered HTTP 301" in str(health.value)
    # not the Gateway's verdict on the rows: retried later, never refused for good
    assert not err.value.config_problem and not err.value.outage
    assert len(peer.requests) == 2                            # and never followed


def test_a_proxys_error_page_on_health_says_its_status():
    page = reply("HTTP/1.1 502 Bad Gateway", b"<html><body>upstream down</body></html>")
    with HostilePeer({INGEST: ("wire", page), "/health": ("wire", page)}) as peer:
        c = client(peer.url)
        with pytest.raises(GatewayError, match="health answered HTTP 502: a page that is not"):
            c.health(force=True)
        with pytest.raises(GatewayError, match="HTTP 502: a page that is not the Gateway's"):
            ingest(c)


# -- a reply that should be tiny is not parsed whole when it is not -----------------------------

def _flood(prefix, n=(4 << 20) // 3):
    # valid JSON of millions of tiny objects: ~30x its size in memory once parsed
    return prefix + b'"flood":[' + b"[]," * n + b"[]]}"


def test_a_flood_in_a_health_or_ingest_reply_is_not_parsed():
    health = _flood(b'{"status":"ok",')
    ingested = _flood(b'{"code":0,"message":"ok","data":{},')
    with HostilePeer({"/health": ("raw", health), INGEST: ("raw", ingested)}) as peer:
        c = client(peer.url)
        with pytest.raises(GatewayError, match="larger than"):
            c.health(force=True)
        with pytest.raises(GatewayError, match="larger than") as err:
            ingest(c)
    assert not getattr(err.value, "config_problem", False)     # the rows wait, none refused


# -- a JSON body behind a byte-order mark is still JSON ------------------------------------------

def test_a_reply_with_a_byte_order_mark_is_read():
    # some proxies and Windows-built servers prefix UTF-8 with a BOM; json refuses it, HTTP
    # does not forbid it: refusing would park every row and mark the Gateway broken
    bom = b"\xef\xbb\xbf"
    health = bom + b'{"status":"ok","version":"2"}'
    with HostilePeer({INGEST: ("wire", reply("HTTP/1.1 200 OK", bom + OK)),
                      "/health": ("wire", reply("HTTP/1.1 200 OK", health))}) as peer:
        c = client(peer.url)
        assert ingest(c) == {}
        assert c.health(force=True)["status"] == "ok"
