#!/usr/bin/env python3
"""The benchmark cases. Each returns a list of result rows (see ``row``) and, for the chart,
optional series. ``python3 bench/cases.py memory --sessions N`` runs the memory case alone
(run.py runs it in a child process so earlier cases' garbage does not blur its RSS)."""

from __future__ import annotations

import gc
import hashlib
import itertools
import json
import logging
import queue
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common  # noqa: E402

_common.load_plugin()
_log = logging.getLogger("tencentdb_offload")
_log.addHandler(logging.NullHandler())
_log.propagate = False


ns = time.perf_counter_ns
KB = 1024
CONTEXT = 32_000      # every conversation size is over the trigger (compaction target 16k tokens)


def row(rid: str, what: str, case: str, unit: str, median: float, p99: Optional[float],
        n: int, floor: Optional[float], floor_what: str, target: str, met: Optional[bool],
        ratio: Optional[float] = None, note: str = "", **extra: Any) -> Dict[str, Any]:
    if ratio is None and floor:
        ratio = median / floor
    out = {"id": rid, "what": what, "case": case, "unit": unit, "median": median, "p99": p99,
           "n": n, "floor": floor, "floor_what": floor_what, "ratio": ratio, "target": target,
           "met": met, "note": note}
    out.update(extra)
    return out


# -- network watch: no socket work on the thread that calls a hook --------------------------

class NetWatch:
    EVENTS = {"socket.connect", "socket.getaddrinfo", "socket.sendto", "socket.sendmsg",
              "http.client.connect", "http.client.send"}

    def __init__(self) -> None:
        self.thread = threading.get_ident()
        self.active = False
        self.hits: List[str] = []
        sys.addaudithook(self._hook)

    def _hook(self, event: str, args: Any) -> None:
        if self.active and event in self.EVENTS and threading.get_ident() == self.thread:
            self.hits.append(event)


_NET: Optional[NetWatch] = None


def netwatch() -> NetWatch:
    global _NET
    if _NET is None:
        _NET = NetWatch()
    return _NET


def _wait_breaker_open(bed: _common.Bed, timeout: float = 5.0) -> bool:
    client = bed.runtime.client
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if client.breaker.state == "open":
            return True
        bed.runtime.worker.wake()
        time.sleep(0.02)
    return False


def _prepare_state(gw, state: str) -> None:
    gw.clear_fault()
    if state == "refused":
        gw.set_fault("refuse")
    elif state == "hanging":
        gw.set_fault("hang", hang_seconds=300)


# -- hooks ----------------------------------------------------------------------------------

HOOK_SIZES = (("1 KB", 1 * KB), ("100 KB", 100 * KB), ("1 MB", 1024 * KB))
HISTORY_SIZES = (50, 500, 5000)


def bench_hooks(gw, quick: bool) -> List[Dict[str, Any]]:
    rows: List[Dict[str, Any]] = []
    watch = netwatch()
    reps_post = {1 * KB: 100 if quick else 400, 100 * KB: 40 if quick else 200,
                 1024 * KB: 15 if quick else 60}
    reps_pre = 100 if quick else 400

    # floors: the hand-off the hooks are designed to cost ("a queue put")
    q: "queue.Queue[Any]" = queue.Queue()
    payload = _common.slice_text(0, 1024 * KB)
    post_floor = _common.summary(_common.timed(lambda: q.put((payload,)), 2000, warmup=10))
    while not q.empty():
        q.get_nowait()
    prompt = "please fix the failing test in module %d and explain the cause " * 4
    pre_floor = _common.summary(_common.timed(lambda: (q.put(hashlib.md5(prompt[:500].encode()).hexdigest())),
                                  2000, warmup=10))
    histories = {n: _common.conversation(n, result_chars=2000, prefix="h%d" % n) for n in HISTORY_SIZES}
    # positive control: the watch does see a request made on this thread
    import urllib.request
    watch.hits.clear()
    watch.active = True
    urllib.request.urlopen(gw.url + "/health", timeout=5).read()
    watch.active = False
    control = len(watch.hits)

    for state in ("up", "refused", "hanging"):
        _prepare_state(gw, state)
        bed = _common.Bed(gateway_url=gw.url, session="hooks-" + state, ingest_timeout_ms=1000,
                    timeout_ms=1000)
        sid = "hooks-" + state
        hooks = bed.hooks
        counter = itertools.count()
        try:
            hooks.post_tool_call(tool_name="read_file", args={"path": "/warm"}, result="warm",
                                 session_id=sid, tool_call_id="warm-%s" % state)
            bed.runtime.flush_writes(10)
            if state == "up":
                bed.runtime.flush(None, 10)
            else:
                _wait_breaker_open(bed)
            breaker = bed.runtime.client.breaker.state

            def drain() -> None:
                bed.runtime.flush_writes(30)
                if state == "up":
                    bed.runtime.worker.flush(None, 10)

            for label, size in HOOK_SIZES:
                result = _common.slice_text(size, size)

                def call() -> None:
                    hooks.post_tool_call(tool_name="read_file", args={"path": "/src/x.py"},
                                         result=result, session_id=sid,
                                         tool_call_id="c%d" % next(counter), duration_ms=12)
                watch.hits.clear()
                watch.active = True
                cpu: List[int] = []
                samples = _common.timed(call, reps_post[size], between=drain, cpu=cpu)
                watch.active = False
                s = _common.summary(samples)
                rows.append(row("post_tool_call/%s/%s" % (state, label), "post_tool_call hook",
                                "Gateway %s, result %s" % (state, label), "µs", s["median_us"],
                                s["p99_us"], s["n"], post_floor["median_us"], "queue.put",
                                "p99 < 1 ms", s["p99_us"] < 1000,
                                note="%s; breaker %s; %d network calls on the hook thread%s"
                                % (_common.cpu_note(cpu, "µs"), breaker, len(watch.hits), "" if rows else
                                   " (the audit-hook watch saw %d events for one deliberate "
                                   "GET /health on this thread)" % control),
                                net_calls=len(watch.hits),
                                group="post_tool_call", size=label, state=state))
            for n in HISTORY_SIZES:
                hist = histories[n]

                def call_pre() -> None:
                    hooks.pre_llm_call(session_id=sid, conversation_history=hist,
                                       user_message="please fix the failing test number %d and "
                                       "explain what caused it" % next(counter))
                watch.hits.clear()
                watch.active = True
                cpu = []
                samples = _common.timed(call_pre, reps_pre, between=drain, cpu=cpu)
                watch.active = False
                s = _common.summary(samples)
                target = "p99 < 2 ms at 500; no network" if n == 500 else "no network on the thread"
                met = (s["p99_us"] < 2000 if n == 500 else True) and not watch.hits
                rows.append(row("pre_llm_call/%s/%d" % (state, n), "pre_llm_call hook",
                                "Gateway {}, {:,} messages".format(state, n), "µs", s["median_us"],
                                s["p99_us"], s["n"], pre_floor["median_us"],
                                "md5(prompt) + queue.put", target, met,
                                note="%s; %d network calls on the hook thread"
                                % (_common.cpu_note(cpu, "µs"), len(watch.hits)),
                                net_calls=len(watch.hits), group="pre_llm_call", size=n,
                                state=state))
        finally:
            bed.close()
            gw.clear_fault()
    return rows


# -- should_compress ------------------------------------------------------------------------

def bench_should_compress(quick: bool) -> List[Dict[str, Any]]:
    bed = _common.Bed()
    try:
        eng = bed.engine
        eng.last_prompt_tokens = 50_000
        batch = 1000
        batches = 100 if quick else 400

        class Noop:
            def should_compress(self, prompt_tokens=None, **_):
                return False
        noop = Noop()

        def per_call(obj, arg) -> List[float]:
            f = obj.should_compress
            out = []
            for _ in range(batches + 5):
                t0 = ns()
                for _ in range(batch):
                    f(arg)
                out.append((ns() - t0) / batch)
            return out[5:]

        rows = []
        floor = per_call(noop, 10)
        fl = statistics.median(floor) / 1000
        grown = 2000 if quick else 10000

        def grow() -> None:        # O(1): the session's size must not matter
            for i in range(grown):
                bed.hooks.post_tool_call(tool_name="grep", args={"q": i}, result="r%d" % i,
                                         session_id="bench", tool_call_id="g%d" % i)
            bed.runtime.flush_writes(60)
        for label, arg, before in (
                ("prompt_tokens given", 100_000, None), ("last usage", None, None),
                ("last usage, after {:,} tool calls in the session".format(grown), None, grow)):
            if before:
                before()
            v = per_call(eng, arg)
            med, p99 = statistics.median(v) / 1000, _common.pct(v, 99) / 1000
            rows.append(row("should_compress/" + label, "should_compress", label, "µs", med, p99,
                            len(v) * batch, fl, "empty method call", "O(1), < 10 µs",
                            p99 < 10, note="per call, from batches of %d" % batch,
                            group="should_compress"))
        return rows
    finally:
        bed.close()


# -- compress -------------------------------------------------------------------------------

def _sizes(quick: bool):
    return (100, 1000) if quick else (100, 1000, 10000)


def _reps(n: int, quick: bool) -> int:
    return {100: 30, 1000: 10, 10000: 3}[n] if quick else {100: 100, 1000: 30, 10000: 7}[n]


def bench_compress_local(quick: bool, convs: Dict[int, list]) -> Dict[str, Any]:
    rows, series = [], []
    bed = _common.Bed(context_length=CONTEXT)
    try:
        for n in _sizes(quick):
            msgs = convs[n]
            size_mb = _common.json_bytes(msgs) / 1e6
            reps = _reps(n, quick)
            floor = _common.summary(_common.timed(lambda: json.loads(json.dumps(msgs)), reps, warmup=1,
                                      between=_common.settle))
            k = itertools.count()
            outs = []

            def between() -> None:
                bed.runtime.flush_writes(60)
                bed.engine.on_session_start("local-%d-%d" % (n, next(k)))
                _common.settle()
            between()
            cpu: List[int] = []
            samples = _common.timed(lambda: outs.append(len(bed.engine.compress(msgs))), reps,
                              warmup=1, between=between, cpu=cpu)
            s = _common.summary(samples)
            med_ms, p99_ms, fl_ms = s["median_us"] / 1e3, s["p99_us"] / 1e3, floor["median_us"] / 1e3
            rows.append(row("compress/local/%d" % n, "local compress()",
                            "{:,} messages, {:.1f} MB".format(n, size_mb), "ms", med_ms, p99_ms, s["n"],
                            fl_ms, "json.dumps + json.loads", "≤ 3× floor; linear",
                            med_ms <= 3 * fl_ms, note="%d → %d messages; %s" % (
                                len(msgs), outs[-1], _common.cpu_note(cpu)),
                            group="compress_local", size=n, mb=size_mb))
            series.append({"n": n, "mb": size_mb, "median_ms": med_ms, "floor_ms": fl_ms})
    finally:
        bed.close()
    _linearity(rows, series, "median_ms")
    return {"rows": rows, "series": series}


def _linearity(rows, series, key) -> None:
    if len(series) < 2:
        return
    a, b = series[0], series[-1]
    exp = (statistics.log(b[key] / a[key]) / statistics.log(b["mb"] / a["mb"])) if b[key] > 0 else 0
    for r in rows:
        r["growth_exponent"] = round(exp, 2)
    rows[-1]["note"] += "; growth exponent %.2f (1.0 = linear) from %d to %d messages" % (
        exp, a["n"], b["n"])
    if exp > 1.15:
        rows[-1]["met"] = False


def bench_compress_gateway(gw, quick: bool, convs: Dict[int, list]) -> Dict[str, Any]:
    rows, series = [], []
    gw.clear_fault()
    bed = _common.Bed(gateway_url=gw.url, context_length=CONTEXT, body_limit=64_000_000,
                timeout_ms=120_000)
    errors: List[str] = []
    all_errors: List[str] = []
    plain_note = bed.runtime.note_error

    def note_error(message: str) -> None:      # count failures (the bench's runtime only)
        errors.append(message)
        all_errors.append(message)
        plain_note(message)
    bed.runtime.note_error = note_error
    try:
        for n in _sizes(quick):
            msgs = convs[n]
            size_mb = _common.json_bytes(msgs) / 1e6
            reps = _reps(n, quick)
            floor = _common.summary(_common.timed(lambda: json.loads(json.dumps(msgs)), reps, warmup=1,
                                      between=_common.settle))
            totals, clients, servers, paths, cpus = [], [], [], [], []
            for i in range(reps + 1):
                bed.runtime.flush_writes(60)
                bed.engine.on_session_start("gw-%d-%d" % (n, i))
                _common.settle()
                gw.times()
                errors.clear()
                c0 = time.thread_time_ns()
                t0 = ns()
                bed.engine.compress(msgs)
                total = ns() - t0
                on_cpu = time.thread_time_ns() - c0
                served = gw.times()
                server = sum(t for _p, t in served)
                paths.append(any(p.startswith("/v2/offload/compact") for p, _t in served)
                             and not errors)
                if i == 0:
                    continue            # warm-up (first connection)
                totals.append(total)
                servers.append(server)
                clients.append(total - server)
                cpus.append(on_cpu)
            c, t, sv = _common.summary(clients), _common.summary(totals), _common.summary(servers)
            med_ms, p99_ms, fl_ms = c["median_us"] / 1e3, c["p99_us"] / 1e3, floor["median_us"] / 1e3
            via = sum(paths[1:])
            rows.append(row("compress/gateway/%d" % n, "compress() via fake Gateway (client side)",
                            "{:,} messages, {:.1f} MB".format(n, size_mb), "ms", med_ms, p99_ms, c["n"],
                            fl_ms, "json.dumps + json.loads", "client ≤ 2× floor",
                            med_ms <= 2 * fl_ms and via == reps,
                            note="total %.1f ms, fake Gateway %.1f ms (medians); client %s; "
                            "%d/%d answered by the Gateway without error%s" % (
                                t["median_us"] / 1e3, sv["median_us"] / 1e3, _common.cpu_note(cpus),
                                via, reps,
                                "" if via == reps else " (%s)" % (all_errors[-1:] or ["no /compact request"])[0][:160]),
                            group="compress_gateway", size=n, mb=size_mb,
                            total_ms=t["median_us"] / 1e3, server_ms=sv["median_us"] / 1e3))
            series.append({"n": n, "mb": size_mb, "median_ms": med_ms, "floor_ms": fl_ms,
                           "total_ms": t["median_us"] / 1e3})
    finally:
        bed.close()
    _linearity(rows, series, "median_ms")
    return {"rows": rows, "series": series}


def bench_compress_down(gw, quick: bool, convs: Dict[int, list],
                        local_floor_ms: Optional[float]) -> List[Dict[str, Any]]:
    rows = []
    msgs = convs[1000]
    reps = 10 if quick else 50
    for state in ("refused", "hanging"):
        _prepare_state(gw, state)
        bed = _common.Bed(gateway_url=gw.url, context_length=CONTEXT, timeout_ms=1000,
                    ingest_timeout_ms=1000, session="down-" + state)
        try:
            t0 = ns()
            bed.engine.compress(msgs)
            first_ms = (ns() - t0) / 1e6
            state_after = bed.runtime.client.breaker.state
            k = itertools.count()

            def between() -> None:
                bed.runtime.flush_writes(60)
                bed.engine.on_session_start("down-%s-%d" % (state, next(k)))
                _common.settle()
            between()
            cpu: List[int] = []
            s = _common.summary(_common.timed(lambda: bed.engine.compress(msgs), reps, warmup=1,
                                  between=between, cpu=cpu))
            med, p99 = s["median_us"] / 1e3, s["p99_us"] / 1e3
            rows.append(row("compress/%s/1000" % state, "compress() with the Gateway %s" % state,
                            "1,000 messages, after the first failure", "ms", med, p99, s["n"],
                            local_floor_ms, "local compress() (Gateway off)", "< 50 ms",
                            p99 < 50, note="%s; first failing call took %.0f ms (timeout 1 s); "
                            "breaker %s" % (_common.cpu_note(cpu), first_ms, state_after),
                            first_ms=first_ms,
                            group="compress_down", state=state))
        finally:
            bed.close()
            gw.clear_fault()
    return rows


# -- ingest throughput ------------------------------------------------------------------------

def _ingest_once(gw, total: int, run: int) -> Dict[str, Any]:
    gw.clear_fault()
    sid = "ingest-%d" % run
    bed = _common.Bed(gateway_url=gw.url, session=sid)
    try:
        worker = bed.runtime.worker
        gid = bed.runtime.registry.for_session_id(sid).gateway_id
        ids = ["pair-%d-%05d" % (run, i) for i in range(total)]
        results = [_common.slice_text(i, 1000) for i in range(total)]
        gw.times()
        start_delivered = worker.delivered
        t0 = time.perf_counter()
        for i in range(total):
            bed.hooks.post_tool_call(tool_name="grep", args={"pattern": "x%d" % i},
                                     result=results[i], session_id=sid, tool_call_id=ids[i],
                                     duration_ms=3)
        t_hooks = time.perf_counter() - t0
        samples = [(0.0, 0)]
        deadline = t0 + 120
        while time.perf_counter() < deadline:
            done = worker.delivered - start_delivered
            samples.append((time.perf_counter() - t0, done))
            if done >= total:
                break
            time.sleep(0.05)
        elapsed, delivered = samples[-1]
        server_s = sum(t for p, t in gw.times() if p.startswith("/v2/offload/ingest")) / 1e9
        got = gw.pair_ids(gid)
        windows = []
        j = next((i for i, s in enumerate(samples) if s[0] >= t_hooks), len(samples) - 1)
        for i in range(j + 1, len(samples)):
            if samples[i][0] - samples[j][0] >= 0.5 and samples[j][1] < total:
                windows.append((samples[i][1] - samples[j][1]) / (samples[i][0] - samples[j][0]))
                j = i
        return {"rate": delivered / elapsed if elapsed else 0.0, "delivered": delivered,
                "elapsed": elapsed, "t_hooks": t_hooks, "server_s": server_s,
                "in_order": got == ids, "lost": len(set(ids) - set(got)),
                "dup": len(got) - len(set(got)), "windows": windows}
    finally:
        bed.close()


def bench_ingest(gw, quick: bool) -> List[Dict[str, Any]]:
    total = 2000 if quick else 10000
    runs = [_ingest_once(gw, total, k) for k in range(1 if quick else 3)]
    runs.sort(key=lambda r: r["rate"])
    mid = runs[len(runs) // 2]
    windows = [w for r in runs for w in r["windows"]]
    worst = min(windows) if windows else mid["rate"]
    bound = total / mid["server_s"] if mid["server_s"] else None
    client = total / max(1e-9, mid["elapsed"] - mid["server_s"])
    ok_all = all(r["in_order"] and r["lost"] == 0 and r["dup"] == 0 for r in runs)
    met = mid["rate"] >= 2000 and ok_all
    return [row("ingest/%d" % total, "ingest worker throughput",
                "%s pairs of 1 KB, Gateway up" % "{:,}".format(total), "pairs/s", mid["rate"],
                worst, len(runs), bound, "fake Gateway's own time per pair (its bound)",
                "≥ 2,000 pairs/s; in order; none lost", met,
                ratio=(mid["rate"] / bound) if bound else None,
                note="median of %d runs (%s pairs/s), from the first hook to the last delivery; "
                "p99 column = slowest 0.5 s window after the hooks were done; every run in order "
                "with none lost or duplicated: %s; in the median run the fake Gateway was busy "
                "%.2f s of %.2f s, so the client side alone ran at %s pairs/s"
                % (len(runs), ", ".join("%.0f" % r["rate"] for r in runs), ok_all,
                   mid["server_s"], mid["elapsed"], "{:,.0f}".format(client)),
                group="ingest", in_order=ok_all, client_rate=client, runs=runs)]


# -- memory ---------------------------------------------------------------------------------

def bench_memory(sessions: int, per_session: int = 10) -> List[Dict[str, Any]]:
    bed = _common.Bed(session="mem-0")
    try:
        hooks, eng, rt = bed.hooks, bed.engine, bed.runtime
        hist = _common.conversation(30, result_chars=500, prefix="m")
        samples = []
        data_bytes = 0
        every = max(1, sessions // 40)
        warm = sessions // 5
        t0 = time.perf_counter()
        for s in range(sessions):
            sid = "mem-%d" % s
            eng.on_session_start(sid)
            hooks.pre_llm_call(session_id=sid, user_message="task %d: fix the build" % s,
                               conversation_history=hist)
            for k in range(per_session):
                text = _common.slice_text(s * per_session + k, 1000)
                data_bytes += len(text)
                hooks.post_tool_call(tool_name="read_file", args={"path": "/f%d" % k},
                                     result=text, session_id=sid,
                                     tool_call_id="m%d-%d" % (s, k))
            eng.update_from_response({"prompt_tokens": 1000 + s % 50, "completion_tokens": 10})
            if (s + 1) % every == 0:
                rt.flush_writes(60)
                gc.collect()
                samples.append((s + 1, _common.rss_kb()))
        elapsed = time.perf_counter() - t0
        rt.flush_writes(60)
        stats = rt.store.stats().as_dict()
        after_warm = [kb for s, kb in samples if s >= warm]
        base = after_warm[0]
        growth = max(after_warm) - base
        flat = growth <= max(8 * 1024, 0.05 * base)
        archive_ratio = stats["db_bytes"] / max(1, data_bytes)
        return [
            row("memory/rss", "resident memory", "{:,} sessions, {:,} results (LRU {})".format(
                sessions, sessions * per_session, rt.settings.max_sessions), "MB",
                samples[-1][1] / 1024, max(kb for _s, kb in samples) / 1024, len(samples),
                base / 1024, "RSS after warm-up (%d sessions)" % warm,
                "flat after warm-up", flat,
                note="growth after warm-up %.1f MB; %d sessions in memory, %d evicted; %.1f s; "
                "VmRSS every %d sessions after the writer drained"
                % (growth / 1024, len(rt.registry), rt.registry.evictions, elapsed, every),
                group="memory", rss_series=samples),
            row("memory/archive", "archive size", "{:,} archived results".format(stats["archived_items"]),
                "MB", stats["db_bytes"] / 1e6, None, stats["archived_items"], data_bytes / 1e6,
                "bytes of tool results archived", "≈ data size", archive_ratio <= 1.5,
                ratio=archive_ratio, note="store.db incl. WAL, indexes, args and keys",
                group="memory"),
        ]
    finally:
        bed.close()


if __name__ == "__main__":
    import argparse
    ap = argparse.ArgumentParser()
    ap.add_argument("case", choices=["memory"])
    ap.add_argument("--sessions", type=int, default=10000)
    a = ap.parse_args()
    print(json.dumps(bench_memory(a.sessions)))
