#!/usr/bin/env python3
"""cProfile the code paths behind the targets the benchmark misses, to find why.

    python3 bench/profile_misses.py post_tool_call      # the hook with a 1 MB result
    python3 bench/profile_misses.py compress_gateway    # compress() through the fake Gateway
    python3 bench/profile_misses.py compress_hang       # first compress() with a hanging Gateway
    python3 bench/profile_misses.py compress_local      # local compress(), 1,000 messages
    python3 bench/profile_misses.py whatif_lazy_enqueue # the hook if the outbox row were
                                                        # serialised on the writer thread

Prints the top functions by own time and by cumulative time. Nothing here changes the
plugin's files: the what-if patches a class attribute in this process only.
"""

from __future__ import annotations

import cProfile
import io
import json
import pstats
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common  # noqa: E402
import cases  # noqa: E402
from _gateway import GatewayProc  # noqa: E402


def show(pr: cProfile.Profile, n: int = 18) -> None:
    for key in ("tottime", "cumulative"):
        s = io.StringIO()
        pstats.Stats(pr, stream=s).sort_stats(key).print_stats(n)
        text = s.getvalue()
        print("--- by %s" % key)
        print(text[text.find("   ncalls"):].rstrip())


def post_tool_call(gw: GatewayProc, size: int = 1024 * 1024, reps: int = 30) -> None:
    bed = _common.Bed(gateway_url=gw.url, session="prof")
    try:
        res = _common.slice_text(1, size)
        pr = cProfile.Profile()
        plain = []
        for i in range(reps * 2):
            profiled = i % 2 == 0
            t0 = time.perf_counter_ns()
            if profiled:
                pr.enable()
            bed.hooks.post_tool_call(tool_name="read_file", args={"path": "/x"}, result=res,
                                     session_id="prof", tool_call_id="p%d" % i, duration_ms=3)
            if profiled:
                pr.disable()
            else:
                plain.append(time.perf_counter_ns() - t0)
            bed.runtime.flush_writes(30)
            bed.runtime.worker.flush(None, 10)
        print("post_tool_call, %d KB result: median %.0f µs unprofiled" % (
            size // 1024, _common.summary(plain)["median_us"]))
        show(pr)
    finally:
        bed.close()


def whatif_lazy_enqueue(gw: GatewayProc) -> None:
    """The hook with Outbox.op_enqueue serialising inside the writer's transaction."""
    from tencentdb_offload.archive.outbox import Outbox
    plain_op = Outbox.__dict__["op_enqueue"]

    def lazy_op_enqueue(session, kind, payload, now, mask=None):
        def op(conn):
            conn.execute("INSERT INTO outbox(session,kind,payload,created) VALUES (?,?,?,?)",
                         (session, kind, json.dumps(payload, ensure_ascii=False), now))
        return op
    k = iter(range(10 ** 9))
    for label, impl in (("as shipped", plain_op), ("lazy op_enqueue", staticmethod(lazy_op_enqueue))):
        Outbox.op_enqueue = impl
        try:
            bed = _common.Bed(gateway_url=gw.url, session="whatif")
            try:
                for size_label, size in cases.HOOK_SIZES:
                    res = _common.slice_text(size, size)

                    def call():
                        bed.hooks.post_tool_call(tool_name="read_file", args={"path": "/x"},
                                                 result=res, session_id="whatif",
                                                 tool_call_id="w%d" % next(k), duration_ms=3)

                    def drain():
                        bed.runtime.flush_writes(30)
                        bed.runtime.worker.flush(None, 10)
                    s = _common.summary(_common.timed(call, 60, between=drain))
                    print("%-16s %-7s median %8.1f µs  p99 %8.1f µs" % (
                        label, size_label, s["median_us"], s["p99_us"]))
            finally:
                bed.close()
        finally:
            Outbox.op_enqueue = plain_op


def compress_gateway(gw: GatewayProc) -> None:
    for n in (100, 10000):
        msgs = _common.conversation(n)
        bed = _common.Bed(gateway_url=gw.url, context_length=cases.CONTEXT, body_limit=64_000_000,
                    timeout_ms=120_000)
        try:
            bed.engine.compress(msgs)
            pr = cProfile.Profile()
            tot = srv = 0
            reps = 10 if n == 100 else 2
            for i in range(reps):
                bed.runtime.flush_writes(60)
                bed.engine.on_session_start("prof-%d" % i)
                _common.settle()
                gw.times()
                t0 = time.perf_counter_ns()
                pr.enable()
                bed.engine.compress(msgs)
                pr.disable()
                tot += time.perf_counter_ns() - t0
                srv += sum(t for _p, t in gw.times())
            print("compress via Gateway, %d messages: total %.1f ms, server %.1f ms per call "
                  "(profiled)" % (n, tot / reps / 1e6, srv / reps / 1e6))
            show(pr, 25)
        finally:
            bed.close()


def compress_hang(gw: GatewayProc) -> None:
    msgs = _common.conversation(1000)
    gw.set_fault("hang", hang_seconds=300)
    bed = _common.Bed(gateway_url=gw.url, context_length=cases.CONTEXT, timeout_ms=1000,
                ingest_timeout_ms=1000)
    try:
        pr = cProfile.Profile()
        t0 = time.perf_counter()
        pr.enable()
        bed.engine.compress(msgs)
        pr.disable()
        print("first compress with a hanging Gateway (timeout 1 s): %.0f ms" % (
            (time.perf_counter() - t0) * 1000))
        show(pr, 15)
    finally:
        bed.close()
        gw.clear_fault()


def main() -> int:
    what = sys.argv[1:] or ["post_tool_call", "whatif_lazy_enqueue", "compress_gateway",
                            "compress_hang", "compress_local"]
    gw = GatewayProc(body_limit=64_000_000)
    try:
        for w in what:
            print("=" * 30, w)
            globals()[w](gw)
    finally:
        gw.stop()
    return 0




def compress_local(gw: GatewayProc) -> None:
    """Local compress() at 1,000 messages: after the first failure the Gateway-down path is
    exactly this, so its spread decides the < 50 ms target."""
    msgs = _common.conversation(1000)
    bed = _common.Bed(context_length=cases.CONTEXT)
    try:
        pr = cProfile.Profile()
        plain = []
        for i in range(40):
            bed.runtime.flush_writes(60)
            bed.engine.on_session_start("loc-%d" % i)
            _common.settle()
            t0 = time.perf_counter_ns()
            if i % 2:
                pr.enable()
            bed.engine.compress(msgs)
            if i % 2:
                pr.disable()
            else:
                plain.append(time.perf_counter_ns() - t0)
        s = _common.summary(plain)
        print("local compress, 1,000 messages: median %.1f ms, p99 %.1f ms unprofiled" % (
            s["median_us"] / 1000, s["p99_us"] / 1000))
        show(pr, 22)
    finally:
        bed.close()


if __name__ == "__main__":
    sys.exit(main())
