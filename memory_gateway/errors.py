"""The Gateway's failures as types, and how each is judged (retry, setting, outage).

Callers never see ``URLError`` or ``socket.timeout``: ``GatewayUnavailable`` (not
reachable; ``GatewayTimeout`` when it did not answer in time), ``GatewayRejected`` (it
answered no), ``GatewayProtocolError`` (it answered something that is not the V2 API);
``parse_envelope`` reads a reply into its data or one of them.
"""

from __future__ import annotations

import json
import urllib.parse
from typing import Any, Dict, Optional


class GatewayError(Exception):
    """Base class: anything that went wrong talking to the Gateway."""


class GatewayUnavailable(GatewayError):
    """Not reachable: refused, reset, or the circuit breaker is open."""

    def __init__(self, message: str, body_bytes: int = 0, reset: bool = False) -> None:
        super().__init__(message)
        self.body_bytes = body_bytes
        self.reset = reset          # the connection was cut mid-exchange (body limit, crash)
        self.size_refusal = False   # cut at once after a large body: the Gateway's body limit


class GatewayTimeout(GatewayUnavailable):
    """No answer within the timeout."""


# The Gateway's own envelope codes. Its offload router answers errors with code == HTTP
# status: 400 (validation), 401 (auth), 409 (per-session lock not taken: try again), 503
# (storage unavailable); its legacy handler 400 (bad JSON), 413 (body too large), 415
# (encoding). A code in a 200 reply is judged by this table, never by HTTP ranges.
CODES_CONFIG = frozenset({400, 401, 403, 413, 415})
CODES_AUTH = frozenset({401, 403})
CODES_OUTAGE = frozenset({500, 502, 503, 504})
REDIRECTS = frozenset({301, 302, 303, 307, 308})


class GatewayRejected(GatewayError):
    """The Gateway refused: an HTTP error status, or HTTP 200 with ``code != 0``.

    ``http_status`` is the HTTP status (200 when the refusal came in a success reply);
    ``code`` the envelope's code (None when there was none or it was not an integer). An
    HTTP error is judged by HTTP's classes; a refusal inside a 200 by the Gateway's codes
    (``CODES_*``). A code we do not know is retried, never treated as a setting problem:
    the rows it refused are kept, not dropped.
    """

    def __init__(self, http_status: int, message: str, code: Optional[int] = None) -> None:
        where = ("HTTP %d" % http_status if http_status != 200
                 else "Gateway code %s" % ("?" if code is None else code))
        super().__init__("%s: %s" % (where, message))
        self.http_status = http_status
        self.code = code
        self.message = message

    @property
    def _by_code(self) -> bool:
        return self.http_status == 200

    @property
    def retryable(self) -> bool:
        if self._by_code:
            return self.code not in CODES_CONFIG
        return self.http_status >= 500 or self.http_status in (408, 409, 429)

    @property
    def config_problem(self) -> bool:
        """A setting or the client is wrong (bad key, refused request), not an outage."""
        if self._by_code:
            return self.code in CODES_CONFIG
        return 400 <= self.http_status < 500 and not self.retryable

    @property
    def auth_refused(self) -> bool:
        """The key or instance id was refused."""
        return (self.code in CODES_AUTH) if self._by_code else self.http_status in (401, 403)

    @property
    def too_large(self) -> bool:
        """The body was over the Gateway's limit: send less, not never."""
        return (self.code == 413) if self._by_code else self.http_status == 413

    @property
    def outage(self) -> bool:
        """The Gateway cannot serve anyone now (its storage, a proxy, a crash)."""
        return (self.code in CODES_OUTAGE) if self._by_code else self.http_status >= 500


class BodyTooLarge(GatewayRejected):
    """The request would exceed the Gateway's body limit; it was not sent."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(413, "request body %d bytes exceeds the limit of %d" % (size, limit))
        self.size = size
        self.limit = limit
        # not the Gateway's answer (nothing was sent): said so, with the setting that applies
        # (10,000+ small messages cannot be trimmed under it; "HTTP 413" sent people to the Gateway)
        self.args = ("request body of %d bytes not sent: over TENCENTDB_OFFLOAD_BODY_LIMIT (%d)"
                     % (size, limit),)


class GatewayProtocolError(GatewayError):
    """The Gateway answered 200 with something that is not the V2 envelope we expect."""


class ReplyRefused(GatewayProtocolError):
    """A well-formed reply we will not use: a message of invalid shape, or content that is
    not derived from our request (see ``reply_origin``)."""


class GatewayConfigError(GatewayError):
    """A setting makes every call impossible (e.g. a key that cannot go in a header); not sent."""


class GatewayNotSupported(GatewayRejected):
    """The route does not exist on this Gateway (HTTP 404)."""


def int_code(value: Any) -> Optional[int]:
    """The envelope's code when it is an integer (JSON ``true`` is not)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def is_envelope(value: Any) -> bool:
    """A reply body the Gateway itself wrote: a JSON object with its ``code`` or ``error``
    (a proxy's or ingress' HTML page is not)."""
    return isinstance(value, dict) and ("code" in value or "error" in value)


def redirect_note(location: str) -> str:
    """A redirect, said so, with where it points (never its credentials): redirects are not
    followed, a body is not re-sent to wherever a peer names."""
    try:
        parts = urllib.parse.urlsplit(location.strip())
        where = "%s://%s%s" % (parts.scheme, parts.netloc.rsplit("@", 1)[-1], parts.path) \
            if parts.scheme else parts.path
    except ValueError:
        where = ""
    where = "".join(ch for ch in where if " " < ch <= "~")[:200] or "(no Location)"
    return "a redirect to %s, not followed: set the Gateway URL to where it points" % where


def page_note(status: int, raw: bytes, location: str = "") -> str:
    """What a reply that is not the Gateway's JSON was, for a person reading the error."""
    if status in REDIRECTS:
        return redirect_note(location)
    return "a page that is not the Gateway's (a proxy in front of it?)" if raw else "no message"


def parse_envelope(path: str, status: int, raw: bytes, location: str = "") -> Dict[str, Any]:
    """The ``data`` of a Gateway reply, or the error the reply means (``location``: the reply's
    Location header, named when the reply is a redirect)."""
    try:
        env = json.loads(raw.decode("utf-8-sig")) if raw else None
    except (ValueError, UnicodeDecodeError):
        env = None
    except RecursionError:      # nested past the parser's depth: a broken reply, not a crash
        raise GatewayProtocolError("reply to %s is nested too deeply to read" % path) from None
    if status in REDIRECTS:     # an ingress moving http to https, a path: never the Gateway's
        raise GatewayRejected(status, redirect_note(location))
    if status == 404:
        if not is_envelope(env):    # a proxy's page while the Gateway restarts: not its verdict
            raise GatewayUnavailable("%s answered HTTP 404 with a page that is not the "
                                     "Gateway's (a proxy in front of a restarting Gateway?)"
                                     % path)
        raise GatewayNotSupported(404, "no route %s on this Gateway" % path)
    if 400 <= status < 500 and status != 413 and not is_envelope(env):
        # a proxy's page (its own 400/405/...): no verdict of the Gateway on our rows
        raise GatewayUnavailable("%s answered HTTP %d with a page that is not the "
                                 "Gateway's (a proxy in front of it?)" % (path, status))
    if status != 200:
        message = ""
        if isinstance(env, dict):
            message = str(env.get("message") or env.get("error") or "")
        raise GatewayRejected(status, message[:300] or page_note(status, raw),
                              code=int_code(env.get("code") if isinstance(env, dict) else None))
    if not isinstance(env, dict):
        raise GatewayProtocolError("reply to %s is not a JSON object" % path)
    code = env.get("code")
    if int_code(code) != 0:     # (False and 0.0 equal 0 in Python: not the Gateway's 0)
        raise GatewayRejected(200, str(env.get("message") or env.get("error")
                                       or "code %r" % code)[:300], code=int_code(code))
    data = env.get("data", {})
    if not isinstance(data, dict):
        raise GatewayProtocolError("reply to %s has data of type %s" % (path, type(data).__name__))
    return data
