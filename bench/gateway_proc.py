#!/usr/bin/env python3
"""The fake Gateway (tests/fakes/fake_gateway.py) in its own process, as a real Gateway is,
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

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "fakes"))
import fake_gateway as fg  # noqa: E402

ns = time.perf_counter_ns
_tls = threading.local()


# -- equivalent, faster versions of the fake's quadratic helpers ---------------------------
# The fake ports the Gateway's compaction loops literally (O(n²) in the message count), which
# at 10,000 messages would take minutes per request. The bench only needs the same *answers*
# sooner: these return exactly what the originals return (same picks, same tie-breaking), and
# the server's time is subtracted from every client-side figure anyway.

import heapq  # noqa: E402
import re  # noqa: E402

_CJK_RE = re.compile("[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")


def _estimate_text_tokens(text: str) -> int:
    cjk = 0 if text.isascii() else sum(map(len, _CJK_RE.findall(text)))
    return max(1, fg.math.ceil(cjk / 1.7 + (len(text) - cjk) / 4))


def _truncate_largest(msgs, tokens, excess, scale, skip_mmd):
    freed = 0.0
    heap = []
    for i, m in enumerate(msgs):
        if (skip_mmd and fg._is_mmd(m)) or not fg._is_tool_result(m):
            continue
        n = len(fg._text_content(m))
        if n > fg.TRUNCATE_CHARS:
            heap.append((-n, i))
    heapq.heapify(heap)
    rnd = 0
    while rnd < len(msgs) and freed < excess and heap:
        rnd += 1
        _n, best = heapq.heappop(heap)
        m = msgs[best]
        before = fg._text_content(m)
        fg._set_text_content(m, before[:fg.TRUNCATE_CHARS] + fg.TRUNCATE_NOTICE)
        new = fg.estimate_message_tokens(m)
        freed += (tokens[best] - new) * scale
        tokens[best] = new
        if fg._text_content(m) == before:
            break    # already cut and still the largest: the original repeats this no-op
        n = len(fg._text_content(m))
        if n > fg.TRUNCATE_CHARS:
            heapq.heappush(heap, (-n, best))
    return freed


def _pick_head_deletions(msgs, tokens, protected, need):
    chosen = set()
    freed = 0.0
    non_mmd = sum(1 for m in msgs if not fg._is_mmd(m))

    def deletable(i):
        m = msgs[i]
        return not (fg._is_mmd(m) or fg._is_system_reminder(m) or fg._role(m) == "system")

    for only_results in (True, False):
        if freed >= need:
            break
        for i in range(protected):
            if freed >= need:
                break
            if i in chosen or not deletable(i) or (only_results and not fg._is_tool_result(msgs[i])):
                continue
            if non_mmd - len(chosen) - 1 < fg.MIN_KEEP:   # chosen holds non-MMD indices only
                break
            chosen.add(i)
            freed += tokens[i]
    return chosen


_plain_l1 = fg.FakeGateway._run_l1
_plain_l2 = fg.FakeGateway._run_l2


def _run_l1(self, sess, pairs):
    """The original, minus its rebuild of the set of known ids from every entry per request."""
    known = getattr(sess, "_bench_known", None)
    if known is None or getattr(sess, "_bench_len", -1) != len(sess.entries):
        known = {e["tool_call_id"] for e in sess.entries}
    fresh = [p for p in pairs if p["tool_call_id"] not in known]
    real, sess.entries = sess.entries, []
    try:
        _plain_l1(self, sess, fresh)
    finally:
        new, sess.entries = sess.entries, real
        real.extend(new)
    known.update(e["tool_call_id"] for e in new)
    sess._bench_known, sess._bench_len = known, len(real)


def _run_l2(self, sess):
    if sess.boundaries:          # without a boundary no entry can be mapped: nothing to do
        _plain_l2(self, sess)


_ORIGINAL = (fg.estimate_text_tokens, fg._truncate_largest, fg._pick_head_deletions)
fg.FakeGateway._run_l1 = _run_l1
fg.FakeGateway._run_l2 = _run_l2
fg.estimate_text_tokens = _estimate_text_tokens
fg._truncate_largest = _truncate_largest
fg._pick_head_deletions = _pick_head_deletions


_FAST = (fg.estimate_text_tokens, fg._truncate_largest, fg._pick_head_deletions)


def self_check() -> int:
    """The swapped compaction helpers give the fake's original replies (exit 1 if not)."""
    import copy
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import _common as C
    C.load_plugin()
    from tencentdb_offload.compaction import context_window_for, strip_for_wire
    from tencentdb_offload.gateway_client import encode_compact
    from tencentdb_offload.tokens import message_tokens
    bad = 0
    for n, target in ((100, 16_000), (1000, 16_000), (1000, 64_000), (400, 4_000)):
        msgs = C.conversation(n)
        msgs[5]["content"] = "中文内容测试" * 500
        wire, _ = strip_for_wire(msgs)
        tokens = [message_tokens(m) for m in wire]
        body = json.loads(encode_compact("check", wire, ratio=1.5,
                                         context_window=context_window_for(target),
                                         total_tokens=sum(tokens) + 3000, message_tokens=tokens))
        replies = []
        for impl in (_ORIGINAL, _FAST):
            fg.estimate_text_tokens, fg._truncate_largest, fg._pick_head_deletions = impl
            replies.append(fg.FakeGateway()._compact(copy.deepcopy(body), "check")[1]["data"])
        same = replies[0] == replies[1]
        bad += not same
        print("%5d messages, target %6d: %s" % (n, target, "same reply" if same else "DIFFERENT"))
    fg.estimate_text_tokens, fg._truncate_largest, fg._pick_head_deletions = _FAST
    # ingest: the same entries, node mapping and canvases with the original L1/L2
    states = []
    for l1, l2 in ((_plain_l1, _plain_l2), (_run_l1, _run_l2)):
        fg.FakeGateway._run_l1, fg.FakeGateway._run_l2 = l1, l2
        gw = fg.FakeGateway()
        for b in range(6):
            if b == 3:
                gw._ingest({"session_id": "check", "tool_pairs": [], "prompt": "fix the build"}, "r")
            pairs = [{"tool_name": "grep", "tool_call_id": "c%d" % (k % 25), "params": {"k": k},
                      "result": "result %d " % k * 20, "timestamp": "2099-01-01T00:00:%02d.000Z" % b}
                     for k in range(b * 10, b * 10 + 10)]
            gw._ingest({"session_id": "check", "tool_pairs": pairs}, "r")
        sess = gw._session("check", create=False)
        states.append(([dict(e) for e in sess.entries], dict(sess.node_map), dict(sess.mmds)))
    fg.FakeGateway._run_l1, fg.FakeGateway._run_l2 = _run_l1, _run_l2
    same = states[0] == states[1]
    bad += not same
    print("ingest L1/L2: %s" % ("same state" if same else "DIFFERENT"))
    return 1 if bad else 0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--body-limit", type=int, default=1_048_576)
    ap.add_argument("--check", action="store_true",
                    help="check the faster helpers against the fake's originals and exit")
    args = ap.parse_args()
    if args.check:
        return self_check()
    gw = fg.FakeGateway(body_limit=args.body_limit)
    times: list = []
    lock = threading.Lock()

    orig_read = fg._Handler.read_body

    def read_body(self):            # body upload time is the client's, not the server's
        t0 = ns()
        try:
            return orig_read(self)
        finally:
            _tls.read_ns = ns() - t0

    fg._Handler.read_body = read_body
    orig_serve = gw._serve

    plain_reply = fg._Handler.reply

    def reply(self, *a, **k):
        note = getattr(_tls, "note", None)
        if note is not None:
            note()      # before the first reply byte: the client cannot be done earlier
        return plain_reply(self, *a, **k)

    fg._Handler.reply = reply

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
