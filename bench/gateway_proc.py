#!/usr/bin/env python3
"""The fake Gateway (tests/fakes/gateway/) in its own process, as a real Gateway is,
so its CPU time does not share the benchmarked process's GIL.

Protocol: prints ``READY <url>`` and then answers one JSON line per JSON command on stdin:
``{"cmd": "fault", "kind": "refuse"|"hang"|..., "hang_seconds": 60}``, ``{"cmd": "clear"}``,
``{"cmd": "times"}`` (server time per request since the last call: the handler's time minus
the time spent reading the request body off the socket), ``{"cmd": "pairs", "session": id}``
(tool_call_ids the fake accepted, in order), ``{"cmd": "quit"}``.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from fakes.gateway import server, transport  # noqa: E402

ns = time.perf_counter_ns
_tls = threading.local()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--body-limit", type=int, default=1_048_576)
    args = ap.parse_args()
    gw = server.FakeGateway(body_limit=args.body_limit)
    times: list = []
    lock = threading.Lock()

    orig_read = transport._Handler.read_body

    def read_body(self):            # body upload time is the client's, not the server's
        t0 = ns()
        try:
            return orig_read(self)
        finally:
            _tls.read_ns = ns() - t0

    transport._Handler.read_body = read_body
    orig_serve = gw._serve

    plain_reply = transport._Handler.reply

    def reply(self, *a, **k):
        note = getattr(_tls, "note", None)
        if note is not None:
            note()      # before the first reply byte: the client cannot be done earlier
        return plain_reply(self, *a, **k)

    transport._Handler.reply = reply

    def serve(h):
        _tls.read_ns = 0
        t0 = ns()
        done = []

        def note() -> None:
            if not done:
                done.append(1)
                with lock:
                    times.append((urlsplit(h.path).path, ns() - t0 - _tls.read_ns))
        _tls.note = note
        try:
            orig_serve(h)
        finally:
            note()
            _tls.note = None
            with gw._state_lock:    # keep the fake's own memory flat over long runs
                gw.requests.clear()
                gw._compacts.clear()

    gw._serve = serve
    gw.start()
    print("READY " + gw.url, flush=True)
    for line in sys.stdin:
        try:
            cmd = json.loads(line)
        except ValueError:
            continue
        c = cmd.get("cmd")
        out: dict = {"ok": True}
        if c == "fault":
            gw.set_fault(cmd["kind"], hang_seconds=float(cmd.get("hang_seconds", 60)))
        elif c == "clear":
            gw.clear_fault()
        elif c == "times":
            with lock:
                out["times"], times[:] = list(times), []
        elif c == "pairs":
            with gw._state_lock:
                sess = gw._session(cmd["session"], create=False)
                out["ids"] = [p.get("tool_call_id") for p in sess.pairs] if sess else []
        elif c == "quit":
            print(json.dumps(out), flush=True)
            break
        print(json.dumps(out), flush=True)
    gw.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
