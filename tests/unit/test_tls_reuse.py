"""Over TLS too, bytes past a reply are never read as the next reply (see the plain-HTTP
case in test_hostile_gateway_limits)."""

import json
import shutil
import socket
import ssl
import subprocess
import threading

import pytest

from tencentdb_offload.memory_gateway.client import CircuitBreaker, GatewayClient


@pytest.fixture
def tls_files(tmp_path, monkeypatch):
    """A throwaway certificate for 127.0.0.1, trusted through SSL_CERT_FILE."""
    if shutil.which("openssl") is None:
        pytest.skip("no openssl command to make a test certificate")
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", str(key), "-out",
                    str(cert), "-days", "2", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True, timeout=60)
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    return key, cert


def _read_request(conn, buf):
    while b"\r\n\r\n" not in buf:
        data = conn.recv(65536)
        if not data:
            return None
        buf += data
    head, _, buf = buf.partition(b"\r\n\r\n")
    need = sum(int(line.split(b":")[1]) for line in head.split(b"\r\n")
               if line.lower().startswith(b"content-length:"))
    while len(buf) < need:
        buf += conn.recv(65536)
    return buf[need:]


def _serve(srv, ctx, served):
    """Each reply's head, then its body and a stale reply in one TLS record."""
    while True:
        try:
            raw, _ = srv.accept()
            conn = ctx.wrap_socket(raw, server_side=True)
        except OSError:
            return
        buf = b""
        try:
            while (buf := _read_request(conn, buf)) is not None:
                served.append(len(served) + 1)
                body = json.dumps({"code": 0, "data": {"n": len(served)}}).encode()
                stale = json.dumps({"code": 0, "data": {"n": "stale"}}).encode()
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body))
                threading.Event().wait(0.05)
                conn.sendall(body + b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n"
                             % len(stale) + stale)
        except OSError:
            pass
        finally:
            conn.close()


def test_bytes_kept_by_tls_past_a_reply_are_not_the_next_reply(tls_files):
    key, cert = tls_files
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(str(cert), str(key))
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    served = []
    threading.Thread(target=_serve, args=(srv, ctx, served), daemon=True).start()
    try:
        c = GatewayClient("https://127.0.0.1:%d" % srv.getsockname()[1], "k", "svc",
                          ingest_timeout_ms=3000, breaker=CircuitBreaker(base_backoff=0.01))
        answers = [c.query_mmd("hermes-s1")["n"] for _ in range(3)]
        c.close()
    finally:
        srv.close()
    assert answers == [1, 2, 3], answers
