"""A scripted, OpenAI-compatible chat-completions server for end-to-end tests.

Stdlib only (``ThreadingHTTPServer`` on 127.0.0.1, ephemeral port). Hermes talks to
it exactly like to a real provider (``model.provider: custom``, ``base_url = fake.url``).

Behaviour is scripted by the *last user message* of a request: its first non-empty line
(plugins may append context after a blank line, which is ignored). If that line is not a
``DO`` command but a later line starts with ``DO `` (Hermes merged an injected user message,
e.g. a canvas or notice, in front of the prompt), the last such line is the command.

    DO read <path> [<path> ...]   -> one ``read_file`` call per path, all in ONE
                                     assistant message (parallel tool calls)
    DO recall <id> [<id> ...]     -> one ``tdai_read_cos {"tool_call_id": id}`` per id, all in
                                     ONE assistant message
    DO search <query>             -> ``tdai_offload_search {"query": query}``
    DO run <command line>         -> ``terminal {"command": command line}``
    anything else                 -> plain final text, no tool call

When the last message of a request is a ``tool`` result, the tool phase is over
and the answer is final text: ``done: ...`` for reads, ``recalled: <first 200
chars of the tool result>`` for a recall (the batch's last result), ``found: <...>``
for a search.

Requests without ``tools`` are auxiliary calls (title generation, the built-in
compressor's summariser): they get a plain-text answer, short unless the prompt asks for a
length — the built-in's summary prompt says ``Target ~N tokens`` (every Hermes version), and
gets a summary of about N tokens, as a real summariser writes: a shorter one would land the
built-in's compactions smaller than any real run of it does.

``usage.prompt_tokens`` follows the real request size (see :func:`prompt_tokens`),
so an engine that lets the context grow past its window shows it on the wire.

A provider's prompt cache is modelled by :class:`PrefixCache` (a request's cached tokens are
its longest common prefix with any earlier request); ``FakeLLM(report_cache=True)`` reports
them like OpenAI does (``usage.prompt_tokens_details.cached_tokens``), over every request it
answered. Every request is recorded (:attr:`FakeLLM.exchanges`) for wire-level analysis.

Probe endpoints Hermes hits on first compaction (``GET /api/v1/models``,
``POST /api/show``, ``GET /v1/models[/<id>]``) and everything else get a quick 404.
"""
from __future__ import annotations

import json
import math
import re
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, List, Optional, Tuple

CHAT_PATHS = ("/v1/chat/completions", "/chat/completions")
SUMMARY_ASKED = re.compile(r"Target ~(\d+) tokens")
SUMMARY_LINE = "Fake summary: earlier turns read files. "


# --------------------------------------------------------------------------- helpers
def text_of_content(content: Any) -> str:
    """All text of a message ``content`` (string, or a list of blocks).

    Text blocks (``type`` text/input_text/output_text) count; Anthropic
    ``tool_result`` blocks count through their nested content; ``tool_use``
    blocks count by name + JSON input. Images and other blocks count as nothing.
    """
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, dict):
        content = [content]
    if not isinstance(content, list):
        return str(content)
    parts: List[str] = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
            continue
        if not isinstance(block, dict):
            continue
        btype = block.get("type")
        if btype in (None, "text", "input_text", "output_text") and isinstance(block.get("text"), str):
            parts.append(block["text"])
        elif btype == "tool_result":
            parts.append(text_of_content(block.get("content")))
        elif btype == "tool_use":
            parts.append(str(block.get("name", "")))
            parts.append(json.dumps(block.get("input", {}), ensure_ascii=False))
    return "".join(parts)


def message_text(msg: Dict[str, Any]) -> str:
    """Text of one message incl. its tool calls' names and argument strings."""
    parts = [text_of_content(msg.get("content"))]
    for tc in msg.get("tool_calls") or []:
        fn = (tc or {}).get("function") or {}
        parts.append(str(fn.get("name", "")))
        args = fn.get("arguments", "")
        parts.append(args if isinstance(args, str) else json.dumps(args, ensure_ascii=False))
    return "".join(parts)


def prompt_chars(body: Dict[str, Any]) -> int:
    n = sum(len(message_text(m)) for m in body.get("messages") or [] if isinstance(m, dict))
    if body.get("tools"):
        n += len(json.dumps(body["tools"], ensure_ascii=False))
    return n


def prompt_tokens(body: Dict[str, Any]) -> int:
    """ceil((text of every message + tool-call names/arguments + JSON of tools) / 4)."""
    return int(math.ceil(prompt_chars(body) / 4.0))


def summary_text(messages: List[Dict[str, Any]]) -> str:
    """An auxiliary call's answer: as many tokens (``prompt_tokens``' 4 chars each) as the
    prompt's ``Target ~N tokens`` asks for, else one line."""
    asked = SUMMARY_ASKED.search(" ".join(message_text(m) for m in messages if isinstance(m, dict)))
    chars = 4 * int(asked.group(1)) if asked else len(SUMMARY_LINE) - 1
    return (SUMMARY_LINE * (chars // len(SUMMARY_LINE) + 1))[:chars].strip()


def last_user_text(messages: List[Dict[str, Any]]) -> str:
    for m in reversed(messages or []):
        if isinstance(m, dict) and m.get("role") == "user":
            return text_of_content(m.get("content"))
    return ""


def command_line(text: str) -> str:
    """First non-empty line of a user message (plugin context may follow it)."""
    for line in (text or "").splitlines():
        if line.strip():
            return line.strip()
    return ""


_VERBS = ("read", "recall", "search", "run")


def _is_command(line: str) -> bool:
    words = line.split()
    return len(words) >= 3 and words[0] == "DO" and words[1] in _VERBS


def parse_command(text: str) -> Tuple[str, List[str]]:
    """``("read", [paths])`` / ``("recall", [id])`` / ``("search", [query])`` / ``("text", [])``."""
    line = command_line(text)
    if not _is_command(line):
        later = [l.strip() for l in (text or "").splitlines() if _is_command(l.strip())]
        line = later[-1] if later else line
    words = line.split()
    if _is_command(line):
        verb = words[1]
        if verb == "read":
            return verb, words[2:]
        if verb == "recall":
            return verb, words[2:]
        return verb, [line.split(None, 2)[2]]
    return "text", []


@dataclass
class Exchange:
    """One request the server answered."""

    path: str
    body: Dict[str, Any]
    usage: Dict[str, int]
    auxiliary: bool
    command: Tuple[str, List[str]]
    reply_text: Optional[str] = None
    reply_tool_calls: List[Tuple[str, str, Dict[str, Any]]] = field(default_factory=list)
    at: float = 0.0

    @property
    def messages(self) -> List[Dict[str, Any]]:
        return self.body.get("messages") or []

    @property
    def prompt_tokens(self) -> int:
        return self.usage["prompt_tokens"]


# --------------------------------------------------------------------------- prompt cache
def request_units(body: Dict[str, Any]) -> List[Tuple[Tuple[str, str, str], str]]:
    """A request as a provider's prompt cache sees it, in order: the tool schemas, then every
    message. Each unit is ``((kind, role, tool_call_id), text)``; ``text`` is what
    :func:`prompt_chars` counts, so the units' lengths add up to the request's size."""
    units: List[Tuple[Tuple[str, str, str], str]] = []
    if body.get("tools"):
        units.append((("tools", "", ""), json.dumps(body["tools"], ensure_ascii=False)))
    for m in body.get("messages") or []:
        if isinstance(m, dict):
            units.append((("message", str(m.get("role", "")), str(m.get("tool_call_id") or "")),
                          message_text(m)))
    return units


def common_prefix_len(a: str, b: str) -> int:
    """Length of the longest common prefix of two strings (slice compares, no char loop)."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


class PrefixCache:
    """A provider's prompt cache: :meth:`add` returns how many prompt tokens of a request
    are its longest common prefix with ANY request added before (whole units as in
    :func:`request_units`, plus the common start of the first unit that differs, when its
    role and tool call id match), in this module's token count (chars / 4, rounded down,
    at most :func:`prompt_tokens`). Real caches work in blocks (e.g. 128 tokens) and expire;
    this model does neither. A trie of units: memory grows with the distinct prefixes only."""

    def __init__(self) -> None:
        self._root: Dict[Any, Any] = {}

    def add(self, body: Dict[str, Any]) -> int:
        node, chars, matching = self._root, 0, True
        for key, text in request_units(body):
            child = node.get((key, text))
            if child is None:
                if matching:
                    chars += max((common_prefix_len(text, t) for k, t in node if k == key), default=0)
                    matching = False
                child = node[(key, text)] = {}
            elif matching:
                chars += len(text)
            node = child
        return min(prompt_tokens(body), chars // 4)


# --------------------------------------------------------------------------- server
class FakeLLM:
    """Scripted OpenAI-compatible server. Use as a context manager or start()/stop()."""

    def __init__(self, model: str = "fake-model", host: str = "127.0.0.1", port: int = 0,
                 report_cache: bool = False):
        self.model = model
        self._cache = PrefixCache() if report_cache else None
        self._host, self._port = host, port
        self._lock = threading.Lock()
        self._exchanges: List[Exchange] = []
        self._tool_calls: List[Tuple[str, str, Dict[str, Any]]] = []
        self._other: List[Tuple[str, str]] = []
        self._next_call = 0
        self._server: Optional[ThreadingHTTPServer] = None
        self._thread: Optional[threading.Thread] = None

    # ---- lifecycle
    def start(self) -> "FakeLLM":
        fake = self

        class Handler(_Handler):
            owner = fake

        self._server = ThreadingHTTPServer((self._host, self._port), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="fake-llm", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> "FakeLLM":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._server is not None, "FakeLLM not started"
        return self._server.server_address[1]

    @property
    def url(self) -> str:
        """Base URL for Hermes' ``model.base_url`` (ends in ``/v1``)."""
        return f"http://127.0.0.1:{self.port}/v1"

    # ---- recordings (snapshots; safe to read while Hermes runs)
    @property
    def exchanges(self) -> List[Exchange]:
        with self._lock:
            return list(self._exchanges)

    @property
    def requests(self) -> List[Dict[str, Any]]:
        """Every chat-completions request body, in arrival order."""
        return [e.body for e in self.exchanges]

    @property
    def main_exchanges(self) -> List[Exchange]:
        """Requests that carried ``tools`` (the agent loop, not auxiliary calls)."""
        return [e for e in self.exchanges if not e.auxiliary]

    @property
    def tool_calls_issued(self) -> List[Tuple[str, str, Dict[str, Any]]]:
        """``(id, name, args)`` of every tool call this server told the model to make."""
        with self._lock:
            return list(self._tool_calls)

    @property
    def other_requests(self) -> List[Tuple[str, str]]:
        """``(method, path)`` of every non-chat request (probes), answered 404."""
        with self._lock:
            return list(self._other)

    def _new_call_id(self) -> str:
        with self._lock:
            self._next_call += 1
            return f"call_{self._next_call}"

    # ---- scripting
    def respond(self, path: str, body: Dict[str, Any]) -> Exchange:
        messages = body.get("messages") or []
        usage_prompt = prompt_tokens(body)
        auxiliary = not body.get("tools")
        command = parse_command(last_user_text(messages))
        ex = Exchange(path=path, body=body, usage={}, auxiliary=auxiliary, command=command, at=time.time())
        last = messages[-1] if messages and isinstance(messages[-1], dict) else {}
        verb, params = command
        if auxiliary:
            ex.reply_text = summary_text(messages)
        elif last.get("role") == "tool":
            result = text_of_content(last.get("content"))
            if verb == "recall":
                ex.reply_text = "recalled: " + result[:200]
            elif verb == "search":
                ex.reply_text = "found: " + result[:200]
            elif verb == "read":
                ex.reply_text = "done: read %d file(s)" % len(params)
            elif verb == "run":
                ex.reply_text = "ran: " + result[:200]
            else:
                ex.reply_text = "done."
        elif verb == "read":
            ex.reply_tool_calls = [(self._new_call_id(), "read_file", {"path": p}) for p in params]
        elif verb == "recall":
            ex.reply_tool_calls = [(self._new_call_id(), "tdai_read_cos", {"tool_call_id": p}) for p in params]
        elif verb == "search":
            ex.reply_tool_calls = [(self._new_call_id(), "tdai_offload_search", {"query": params[0]})]
        elif verb == "run":
            ex.reply_tool_calls = [(self._new_call_id(), "terminal", {"command": params[0]})]
        else:
            ex.reply_text = "ok: " + (command_line(last_user_text(messages))[:60] or "nothing to do")
        completion = max(1, math.ceil(len(ex.reply_text or json.dumps([c[2] for c in ex.reply_tool_calls])) / 4))
        ex.usage = {
            "prompt_tokens": usage_prompt,
            "completion_tokens": completion,
            "total_tokens": usage_prompt + completion,
        }
        with self._lock:
            if self._cache is not None:
                ex.usage["prompt_tokens_details"] = {"cached_tokens": self._cache.add(body)}
            self._exchanges.append(ex)
            self._tool_calls.extend(ex.reply_tool_calls)
        return ex

    def _record_other(self, method: str, path: str) -> None:
        with self._lock:
            self._other.append((method, path))


class _Handler(BaseHTTPRequestHandler):
    owner: FakeLLM
    protocol_version = "HTTP/1.0"  # one response per connection; SSE ends with close

    def log_message(self, *args) -> None:  # quiet
        pass

    def _not_found(self) -> None:
        self.owner._record_other(self.command, self.path)
        payload = b'{"error": {"message": "not found", "type": "not_found"}}'
        self.send_response(404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def do_GET(self) -> None:
        self._not_found()

    do_HEAD = do_DELETE = do_PUT = do_GET

    def do_POST(self) -> None:
        path = self.path.split("?", 1)[0]
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if path not in CHAT_PATHS:
            self._not_found()
            return
        try:
            body = json.loads(raw.decode("utf-8") or "{}")
        except ValueError:
            payload = b'{"error": {"message": "bad json"}}'
            self.send_response(400)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
            return
        ex = self.owner.respond(path, body)
        try:
            if body.get("stream"):
                self._stream(ex)
            else:
                self._json(ex)
        except (BrokenPipeError, ConnectionResetError):
            pass

    # ---- response shapes
    def _base(self) -> Dict[str, Any]:
        return {"id": "chatcmpl-fake-%d" % int(time.time() * 1000), "created": int(time.time()),
                "model": self.owner.model}

    def _json(self, ex: Exchange) -> None:
        msg: Dict[str, Any] = {"role": "assistant", "content": ex.reply_text}
        finish = "stop"
        if ex.reply_tool_calls:
            msg["content"] = None
            msg["tool_calls"] = [
                {"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
                for cid, name, args in ex.reply_tool_calls
            ]
            finish = "tool_calls"
        out = dict(self._base(), object="chat.completion",
                   choices=[{"index": 0, "message": msg, "finish_reason": finish}], usage=ex.usage)
        payload = json.dumps(out).encode("utf-8")
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def _stream(self, ex: Exchange) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        base = dict(self._base(), object="chat.completion.chunk")

        def send(choices: List[Dict[str, Any]], **extra: Any) -> None:
            chunk = dict(base, choices=choices, **extra)
            self.wfile.write(b"data: " + json.dumps(chunk).encode("utf-8") + b"\n\n")

        send([{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}])
        if ex.reply_tool_calls:
            for i, (cid, name, args) in enumerate(ex.reply_tool_calls):
                send([{"index": 0, "delta": {"tool_calls": [{
                    "index": i, "id": cid, "type": "function",
                    "function": {"name": name, "arguments": json.dumps(args)},
                }]}, "finish_reason": None}])
            finish = "tool_calls"
        else:
            send([{"index": 0, "delta": {"content": ex.reply_text or ""}, "finish_reason": None}])
            finish = "stop"
        send([{"index": 0, "delta": {}, "finish_reason": finish}])
        send([], usage=ex.usage)
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()


if __name__ == "__main__":  # manual use: python fake_llm.py -> prints the URL, serves until ^C
    with FakeLLM() as srv:
        print(srv.url, flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
