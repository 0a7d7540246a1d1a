"""One HTTP/1.1 exchange with a deadline for the whole of it and a cap on the reply size.

``http.client`` applies its timeout to each ``recv``, so a peer that trickles a byte every
few seconds keeps a caller blocked forever, and it reads any reply size into memory. This
module speaks the small subset of HTTP/1.1 the Gateway uses (Content-Length, chunked or
read-to-close bodies, keep-alive) and checks the deadline before every socket operation.
"""

from __future__ import annotations

import select
import socket
import ssl
import time
from typing import Dict, List, Optional, Tuple

MAX_HEAD = 64 * 1024            # status line + headers
CHUNK = 64 * 1024


class ExchangeTimeout(TimeoutError):
    """The deadline passed before the whole reply arrived."""


class PeerClosed(ConnectionError):
    """The peer closed the connection; ``started`` says whether any reply byte had arrived."""

    def __init__(self, message: str, started: bool) -> None:
        super().__init__(message)
        self.started = started


class BadReply(ValueError):
    """The peer's bytes are not an HTTP/1.x reply we can read."""


class ReplyTooLarge(ValueError):
    """The reply is larger than the cap; it was not read into memory."""

    def __init__(self, limit: int) -> None:
        super().__init__("reply larger than %d bytes" % limit)
        self.limit = limit


class Connection:
    """A socket plus its read buffer; reusable while the peer keeps it alive."""

    def __init__(self, scheme: str, host: str, port: int, deadline: float) -> None:
        sock = _connect(host, port, deadline)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if scheme == "https":
                sock.settimeout(_left(deadline))
                sock = ssl.create_default_context().wrap_socket(sock, server_hostname=host)
        except BaseException:
            sock.close()
            raise
        self.sock = sock
        self.buf = bytearray()
        self.reusable = True

    def close(self) -> None:
        self.reusable = False
        try:
            self.sock.close()
        except OSError:
            pass

    # -- reading --------------------------------------------------------------------------
    def _fill(self, deadline: float, started: bool) -> None:
        self.sock.settimeout(_left(deadline))
        try:
            data = self.sock.recv(CHUNK)
        except socket.timeout as exc:
            raise ExchangeTimeout("deadline passed") from exc
        if not data:
            raise PeerClosed("connection closed by the peer", started)
        self.buf += data

    def _line(self, deadline: float) -> bytes:
        while True:
            end = self.buf.find(b"\r\n")
            if end >= 0:
                line = bytes(self.buf[:end])
                del self.buf[:end + 2]
                return line
            if len(self.buf) > MAX_HEAD:
                raise BadReply("line too long")
            self._fill(deadline, True)

    def _exactly(self, n: int, deadline: float) -> bytes:
        if len(self.buf) >= n:
            out = bytes(self.buf[:n])
            del self.buf[:n]
            return out
        body = bytearray(n)                 # a body of known size: read into place, no copies
        have = len(self.buf)
        body[:have] = self.buf
        self.buf.clear()
        view = memoryview(body)
        while have < n:
            self.sock.settimeout(_left(deadline))
            try:
                got = self.sock.recv_into(view[have:], n - have)
            except socket.timeout as exc:
                raise ExchangeTimeout("deadline passed") from exc
            if not got:
                raise PeerClosed("connection closed by the peer", True)
            have += got
        return body

    def exchange(self, request: bytes, deadline: float,
                 max_reply: int) -> Tuple[int, Dict[str, str], bytes]:
        """Send ``request`` (head + body) and read the whole reply before ``deadline``."""
        self.sock.settimeout(_left(deadline))
        try:
            self.sock.sendall(request)
        except socket.timeout as exc:
            raise ExchangeTimeout("deadline passed while sending") from exc
        status, headers = self._final_head(deadline)
        # 1xx, 204 and 304 carry no body: reading one to the close would wait out the deadline
        body = b"" if status in (204, 304) else self._body(headers, deadline, max_reply)
        if headers.get("connection", "").lower() == "close" or "content-length" not in headers \
                and headers.get("transfer-encoding", "").lower() != "chunked" or self._pending():
            self.close()        # (bytes past the reply's end: the next reply would be theirs)
        return status, headers, body

    def idle(self) -> bool:
        """Nothing arrived since the last reply was read to its end: safe to reuse. Bytes
        sent after it (or the peer's close) make the connection unusable."""
        if not self.reusable or self._pending():
            return False
        try:
            readable, _, _ = select.select([self.sock], [], [], 0)
        except (OSError, ValueError):
            return False
        return not readable

    def _final_head(self, deadline: float) -> Tuple[int, Dict[str, str]]:
        """The final reply's status and headers: interim 1xx replies (100 Continue, 103 Early
        Hints from a proxy) come before it and are skipped, as HTTP requires."""
        while True:
            while b"\r\n\r\n" not in self.buf:
                if len(self.buf) > MAX_HEAD:
                    raise BadReply("reply headers larger than %d bytes" % MAX_HEAD)
                self._fill(deadline, bool(self.buf))
            status, headers = _parse_head(self._head())
            if status == 101:
                raise BadReply("the peer switched protocols (HTTP 101)")
            if status >= 200:
                return status, headers

    def _pending(self) -> bool:
        """Bytes arrived that no reply claimed: in our buffer, or kept by TLS (a read takes
        only what was asked of a record; the rest never makes the socket readable)."""
        return bool(self.buf) or (isinstance(self.sock, ssl.SSLSocket) and self.sock.pending() > 0)

    def _head(self) -> bytes:
        end = self.buf.find(b"\r\n\r\n")
        head = bytes(self.buf[:end])
        del self.buf[:end + 4]
        return head

    def _body(self, headers: Dict[str, str], deadline: float, max_reply: int) -> bytes:
        if headers.get("transfer-encoding", "").lower() == "chunked":
            return self._chunked(deadline, max_reply)
        if "content-length" in headers:
            try:
                size = int(headers["content-length"])
            except ValueError as exc:
                raise BadReply("bad Content-Length") from exc
            if size < 0:
                raise BadReply("bad Content-Length")
            if size > max_reply:
                raise ReplyTooLarge(max_reply)
            return self._exactly(size, deadline)
        while True:                                     # no length: the body ends at close
            if len(self.buf) > max_reply:
                raise ReplyTooLarge(max_reply)
            try:
                self._fill(deadline, True)
            except PeerClosed:
                out = bytes(self.buf)
                self.buf.clear()
                return out

    def _chunked(self, deadline: float, max_reply: int) -> bytes:
        out = bytearray()
        while True:
            line = self._line(deadline).split(b";", 1)[0].strip()
            try:
                size = int(line, 16)
            except ValueError as exc:
                raise BadReply("bad chunk size") from exc
            if size < 0:
                raise BadReply("bad chunk size")
            if size == 0:
                while self._line(deadline):             # trailers end with an empty line
                    pass
                return bytes(out)
            if len(out) + size > max_reply:
                raise ReplyTooLarge(max_reply)
            out += self._exactly(size, deadline)
            self._exactly(2, deadline)


def _connect(host: str, port: int, deadline: float) -> socket.socket:
    """A connected socket before ``deadline``. ``socket.create_connection`` gives each address
    of a name the whole timeout: a name with two addresses that drop packets (an A and an AAAA
    record behind a firewall) would cost twice the deadline."""
    error: Optional[OSError] = None
    for family, kind, proto, _name, addr in socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM):
        sock = socket.socket(family, kind, proto)
        try:
            sock.settimeout(_left(deadline))
            sock.connect(addr)
            return sock
        except OSError as exc:          # ExchangeTimeout included: the deadline has passed
            sock.close()
            if isinstance(exc, ExchangeTimeout):
                raise
            error = exc
    raise error or OSError("no address for the host")


def _left(deadline: float) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise ExchangeTimeout("deadline passed")
    return left


def _parse_head(head: bytes) -> Tuple[int, Dict[str, str]]:
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    # three ASCII digits: str.isdigit() also passes '²' and 5000-digit numbers, which int() refuses
    if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or len(parts[1]) != 3 \
            or not (parts[1].isascii() and parts[1].isdigit()):
        raise BadReply("not an HTTP/1.x status line")
    headers: Dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep:
            headers[name.strip().lower()] = value.strip()
    return int(parts[1]), headers


def build_request(method: str, host: str, target: str, headers: Dict[str, str],
                  payload: Optional[bytes]) -> bytes:
    """Request bytes. Header values must already be checked by ``header_safe``."""
    lines = ["%s %s HTTP/1.1" % (method, target), "Host: %s" % host]
    lines += ["%s: %s" % kv for kv in headers.items()]
    if payload is not None:
        lines.append("Content-Length: %d" % len(payload))
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("ascii")
    return head + payload if payload else head


def header_safe(value: str) -> bool:
    """Printable ASCII only: what every HTTP stack accepts in a header value unchanged."""
    return bool(value) and all(" " <= ch <= "~" for ch in value)


def unsafe_credentials(api_key: str, instance_id: str) -> List[str]:
    """The settings whose value cannot go in an HTTP header (defaults as the client sends them)."""
    return [name for name, value in (("TENCENTDB_OFFLOAD_API_KEY", api_key or "local"),
                                     ("TENCENTDB_OFFLOAD_INSTANCE_ID", instance_id or "default"))
            if not header_safe(value)]


def host_header(host: str, port: int, scheme: str) -> str:
    name = "[%s]" % host if ":" in host else host
    default = 443 if scheme == "https" else 80
    return name if port == default else "%s:%d" % (name, port)


class BaseURL:
    """A Gateway base URL taken apart; ``display`` never shows credentials.

    Raises ValueError with a message that does not repeat the URL (it may hold a password).
    """

    def __init__(self, url: str) -> None:
        import urllib.parse
        problem = "must look like http://host:port or https://host[:port][/path]"
        try:
            parts = urllib.parse.urlsplit(url.strip())
            port = parts.port
            host = parts.hostname
        except ValueError:
            raise ValueError(problem + " (bad host, or a port that is not 1-65535)") from None
        if parts.scheme not in ("http", "https") or not host:
            raise ValueError(problem)
        if port == 0 or any(ch.isspace() or ord(ch) < 32 for ch in url.strip()) \
                or not header_safe(host):
            raise ValueError(problem)
        self.scheme = parts.scheme
        self.host = host
        self.port = port or (443 if parts.scheme == "https" else 80)
        # a request line is ASCII: a path typed with other characters goes percent-encoded
        self.prefix = urllib.parse.quote(parts.path.rstrip("/"), safe="/%:@!$&'()*+,;=~")
        self.has_credentials = "@" in parts.netloc
        netloc = parts.netloc.rsplit("@", 1)[-1]
        self.display = "%s://%s%s" % (self.scheme, netloc, self.prefix)
