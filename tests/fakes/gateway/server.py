"""The fake Gateway itself: lifecycle, faults, observation, routing, auth, and ``main``."""

from __future__ import annotations

import argparse
import copy
import json
import secrets
import socket
import sys
import tempfile
import threading
import time
import traceback
import uuid
from pathlib import Path
from typing import Any, Callable
from urllib.parse import urlsplit

from .common import (
    COMPACT, FAULT_KINDS, INGEST, QUERY_MMD, REAL_COMPACT_SECONDS_PER_100K, Recorded, _HARD_BODY_CAP,
    _request_id, _task_goal, js_json, sanitise_session_id,
)
from .canvas import _CanvasInjection
from .compaction import _CompactRoute
from .memory_v3 import MEMORY_ROUTES, _MemoryRoutes
from .stages import _IngestRoutes, _Session
from .transport import _Fault, _Handler, _Reset, _Server, _decode_body, _norm_path, _parse_json


# ─── The fake ───────────────────────────────────────────────────────────────────

class FakeGateway(_IngestRoutes, _CompactRoute, _CanvasInjection, _MemoryRoutes):
    """In-process fake Gateway. See the module docstring; all state is thread-safe."""

    def __init__(self, api_key: str | None = None, body_limit: int = 1_048_576,
                 host: str = "127.0.0.1", port: int = 0, data_dir: str | None = None):
        self.api_key = api_key
        self.body_limit = body_limit
        self.host = host
        self.port = port
        if data_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="fake-gateway-")  # removed at GC/exit
            self.data_dir = Path(self._tmp.name)
        else:
            self._tmp = None
            self.data_dir = Path(data_dir)
        self.requests: list[Recorded] = []
        self._compacts: list[tuple[dict, dict]] = []
        self._sessions: dict[str, _Session] = {}
        self._state_lock = threading.RLock()   # sessions, files, requests, compacts
        self._ctl_lock = threading.RLock()     # start/stop/bind
        self._fault_lock = threading.Lock()
        self._fault: _Fault | None = None
        self._fault_count = 0
        self._release = threading.Event()      # set → hung requests return
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._running = False
        self._conns: set = set()
        self._started_at = time.monotonic()
        self.latency_s = 0.0                   # added before every answer (slow but healthy)
        self.tamper: Callable[[list], list] | None = None   # rewrites each /compact reply's messages
        self.compact_seconds_per_100k = 0.0    # /compact work time per 100K tokens (slow_compact)
        self.compact_delays: list[float] = []  # seconds each /compact spent "working"
        self.compact_gate: threading.Event | None = None   # /compact waits here (hold_compacts)

    # -- lifecycle -------------------------------------------------------------
    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> "FakeGateway":
        with self._ctl_lock:
            if not self._running:
                self._running = True
                self._bind()
                if self._fault and self._fault.kind == "refuse":
                    self._unbind()
        return self

    def stop(self) -> None:
        with self._ctl_lock:
            self._running = False
            self._release_hangs()
            self._unbind()

    def __enter__(self) -> "FakeGateway":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def _bind(self) -> None:
        if self._server is not None:
            return
        srv = _Server((self.host, self.port), self)
        self.port = srv.server_address[1]  # keep the port across refuse/restart
        self._server = srv
        self._thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.005},
                                        name=f"fake-gateway-{self.port}", daemon=True)
        self._thread.start()

    def _unbind(self) -> None:
        srv, self._server = self._server, None
        if srv is not None:
            srv.shutdown()
            srv.server_close()
            if self._thread is not None:
                self._thread.join(timeout=2)
        # Pooled keep-alive connections must not keep being served by the old handlers.
        with self._state_lock:
            conns = list(self._conns)
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def _track(self, conn: socket.socket, add: bool) -> None:
        with self._state_lock:
            (self._conns.add if add else self._conns.discard)(conn)

    def _release_hangs(self) -> None:
        old, self._release = self._release, threading.Event()
        old.set()

    # -- faults ----------------------------------------------------------------
    def set_fault(self, kind: str | None, *, every: int = 1, paths: tuple | None = None,
                  status: int = 503, hang_seconds: float = 30.0) -> None:
        """Install a fault (None clears). Any change releases hung requests and
        restarts the `every` counter."""
        if kind is not None and kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault kind {kind!r}; expected one of {sorted(FAULT_KINDS)}")
        if every < 1:
            raise ValueError("every must be >= 1")
        with self._ctl_lock:
            with self._fault_lock:
                self._fault = None if kind is None else _Fault(
                    kind, every, None if paths is None else frozenset(_norm_path(p) for p in paths),
                    status, hang_seconds)
                self._fault_count = 0
            self._release_hangs()
            if kind == "refuse":
                self._unbind()
            elif self._running:
                self._bind()

    def slow_compact(self, seconds_per_100k: float = REAL_COMPACT_SECONDS_PER_100K) -> None:
        """Make ``/compact`` take as long as the real one did: ``seconds_per_100k`` for every
        100K tokens of the request's ``total_tokens`` (0 turns it off). The wait runs outside
        the fake's locks, so concurrent compactions overlap like the real ones."""
        self.compact_seconds_per_100k = max(0.0, float(seconds_per_100k))

    def hold_compacts(self) -> threading.Event:
        """Every ``/compact`` (recorded on arrival) waits until the returned event is set (at
        most 60 s): a test sees exactly which calls were sent while it did something else."""
        self.compact_gate = threading.Event()
        return self.compact_gate

    def clear_fault(self) -> None:
        self.set_fault(None)

    def reset_counters(self) -> None:
        with self._fault_lock:
            self._fault_count = 0

    def _take_fault(self, path: str) -> _Fault | None:
        with self._fault_lock:
            f = self._fault
            if f is None or f.kind == "refuse":
                return None
            if f.paths is not None and _norm_path(path) not in f.paths:
                return None
            self._fault_count += 1
            return f if self._fault_count % f.every == 0 else None

    # -- observation -----------------------------------------------------------
    def _session(self, session_id: str, create: bool) -> _Session | None:
        name = sanitise_session_id(session_id)
        with self._state_lock:
            sess = self._sessions.get(name)
            if sess is None:
                sess = _Session(name, self.data_dir)
                if sess.dir.is_dir():
                    sess.load()
                elif not create:
                    return None
                self._sessions[name] = sess
            return sess

    def ingested_pairs(self, session_id: str) -> list[dict]:
        with self._state_lock:
            sess = self._session(session_id, create=False)
            return copy.deepcopy(sess.pairs) if sess else []

    def prompts(self, session_id: str) -> list[str]:
        """Prompt-only ingests accepted (also the internal ones L1.5 skips)."""
        with self._state_lock:
            sess = self._session(session_id, create=False)
            return list(sess.prompts) if sess else []

    def compact_calls(self, session_id: str | None = None) -> list[tuple[dict, dict]]:
        with self._state_lock:
            return [copy.deepcopy(c) for c in self._compacts
                    if session_id is None or c[0].get("session_id") == session_id]

    def entries(self, session_id: str) -> list[dict]:
        with self._state_lock:
            sess = self._session(session_id, create=False)
            return sess.merged_entries() if sess else []

    def session_dir(self, session_id: str) -> Path:
        return self.data_dir / "offload" / sanitise_session_id(session_id)

    def set_canvas(self, session_id: str, content: str, filename: str = "001-task.mmd",
                   active: bool = True) -> None:
        """Force an MMD and make it active (L2 later rewrites it from its own nodes);
        ``active=False``: no file is active afterwards (the real L1.5 after a short task)."""
        with self._state_lock:
            sess = self._session(session_id, create=True)
            sess.set_mmd(filename, content)
            sess.goals[filename] = _task_goal(content)
            sess.nodes[filename] = []
            sess.active = filename if active else None
            sess.save_state()

    # -- request handling ------------------------------------------------------
    def _serve(self, h: _Handler) -> None:
        if not self._running or self._server is None:
            h.drop(reset=False)  # refused/stopped: a pooled connection just dies
            return
        try:
            raw = h.read_body()
        except _Reset:
            h.drop(reset=True)
            return
        path = urlsplit(h.path).path
        headers = {k.lower(): v for k, v in h.headers.items()}
        rec = Recorded(h.command, path, headers, self._body_for_record(raw, headers))
        with self._state_lock:
            self.requests.append(rec)
        if self.latency_s > 0:
            time.sleep(self.latency_s)
        fault = self._take_fault(path)
        if fault is not None:
            self._apply_fault(h, rec, fault, path)
            return
        try:
            outcome = self._route(h.command, path, headers, raw)
        except Exception:  # a bug in the fake: say so loudly, answer like the legacy handler
            traceback.print_exc()
            outcome = (500, self._legacy(500, "Internal server error"))
        if outcome is None:  # body over the limit: the real Gateway destroys the socket
            h.drop(reset=True)
            return
        status, obj = outcome
        rec.status = status
        h.reply(status, js_json(obj))

    def _body_for_record(self, raw: bytes, headers: dict) -> Any:
        data, err = _decode_body(raw, headers.get("content-encoding", ""), _HARD_BODY_CAP)
        if err or not data or not data.strip():
            return None
        obj, ok = _parse_json(data)
        return obj if ok else None

    def _apply_fault(self, h: _Handler, rec: Recorded, f: _Fault, path: str) -> None:
        rid = _request_id()
        if f.kind == "hang":
            self._release.wait(f.hang_seconds)
            h.drop(reset=False)
            return
        if f.kind == "reset":
            h.drop(reset=True)
            return
        if f.kind == "proxy_404":   # what an ingress answers while the Gateway restarts
            rec.status = 404
            h.reply(404, b"<html><body>default backend - 404</body></html>", "text/html")
            return
        if f.kind == "route_404":
            rec.status = 404
            h.reply(404, json.dumps({"error": "Not found: %s %s" % (h.command, path)}).encode())
            return
        if f.kind == "garbage":
            rec.status = 200
            h.reply(200, b"<html>oops", "text/html")
            return
        if f.kind == "5xx":
            status, obj = f.status, {"code": f.status, "message": "Storage unavailable", "request_id": rid}
        elif f.kind == "409":
            status, obj = 409, {"code": 409, "message": "Concurrent write conflict, please retry",
                                "request_id": rid}
        else:  # wrong_shape: 200 and code 0, but not the data a client expects
            status = 200
            obj = ({"code": 0, "message": "ok", "request_id": rid, "data": {"messages": "nope"}}
                   if _norm_path(path) == COMPACT else {"code": 0, "data": []})
        rec.status = status
        h.reply(status, json.dumps(obj).encode("utf-8"))

    @staticmethod
    def _legacy(status: int, message: str) -> dict:
        return {"error": message, "code": status, "message": message,
                "trace_id": str(uuid.uuid4()), "retryable": False}

    def _route(self, method: str, path: str, headers: dict, raw: bytes):
        """Returns (status, json object), or None to reset the connection."""
        if path == "/health" and method == "GET":
            return 200, self._health()
        memory = _norm_path(path) in MEMORY_ROUTES and method == "POST"   # memory_tencentdb's calls
        if not path.startswith("/v2/offload/") and not memory:
            return 404, {"error": f"Not found: {method} {path}"}
        rid = _request_id()
        denied = self._auth(headers)
        if denied:
            return 401, {"code": 401, "message": denied, "request_id": rid}
        route = _norm_path(path)
        if memory:
            body, ok = _parse_json(raw)
            return self._memory_route(route, body, rid) if ok else (400, self._legacy(400, "Invalid JSON body"))
        handlers: dict[str, Callable] = {INGEST: self._ingest, COMPACT: self._compact,
                                         QUERY_MMD: self._query_mmd}
        if method != "POST" or route not in handlers:
            return 404, {"error": f"Not found: {method} {path}"}
        data, err = _decode_body(raw, headers.get("content-encoding", ""), self.body_limit)
        if err == "too_large":
            return None
        if err == "encoding":
            return 415, self._legacy(415, f"Unsupported Content-Encoding: {headers.get('content-encoding')}")
        if err == "corrupt":
            return 400, self._legacy(400, "Invalid compressed body")
        body, ok = _parse_json(data)
        if not ok:
            return 400, self._legacy(400, "Invalid JSON body")
        return handlers[route](body, rid)

    def _auth(self, headers: dict) -> str | None:
        auth = headers.get("authorization", "")
        if self.api_key is not None:  # gateway-level key check, constant time like the real one
            if not auth.startswith("Bearer ") or not auth[7:].strip():
                return "Unauthorized: missing Bearer token"
            if not secrets.compare_digest(auth[7:].strip().encode(), self.api_key.encode()):
                return "Unauthorized: invalid token"
        if not auth.startswith("Bearer ") or not auth[7:].strip():
            return "Missing or invalid Authorization header. Expected: Bearer {api_key}"
        if not headers.get("x-tdai-service-id", "").strip():
            return "Missing x-tdai-service-id header"
        return None

    def _health(self) -> dict:
        return {"status": "ok", "version": "0.1.0", "uptime": int(time.monotonic() - self._started_at),
                "stores": {"vectorStore": True, "embeddingService": False},
                "services": {"timerScanner": {"scansCompleted": 0, "tasksEnqueued": 0, "scanErrors": 0,
                                              "isLeader": True, "nodeId": "scanner-fake"},
                             "pipelineWorker": {"tasksConsumed": 0, "tasksCompleted": 0, "tasksFailed": 0,
                                                "workerId": "worker-fake", "deadLetterCount": 0},
                             "stateBackend": "connected"}}

    @staticmethod
    def _ok(data: Any, rid: str) -> tuple[int, dict]:
        return 200, {"code": 0, "message": "ok", "request_id": rid, "data": data}

    @staticmethod
    def _zod_error(issues: list, rid: str) -> tuple[int, dict]:
        return 400, {"code": 400, "message": json.dumps(issues, indent=2, ensure_ascii=False), "request_id": rid}



def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Fake TencentDB Agent Memory Gateway (offload V2)")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--api-key", default=None)
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--body-limit", type=int, default=1_048_576)
    args = ap.parse_args(argv)
    gw = FakeGateway(api_key=args.api_key, body_limit=args.body_limit, host=args.host,
                     port=args.port, data_dir=args.data_dir).start()
    print(f"listening on {gw.url}", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        gw.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
