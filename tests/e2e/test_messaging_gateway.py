"""End-to-end: many conversations at once in ONE real ``hermes gateway run`` (API server).

The messaging gateway is how many people run Hermes: one long-lived process serves every
conversation and is restarted now and then. This suite starts ``hermes gateway run`` with the
API server platform, this plugin as the context engine, the fake model (tests/fakes/fake_llm.py)
and the fake TencentDB Gateway (tests/fakes/gateway/), and drives CONVERSATIONS
conversations concurrently (more than the plugin's in-memory LRU of 20), each several
``DO read`` turns of two files (~12.6K tokens of tool results a turn) so that every conversation
crosses the 0.75 threshold of a 64K window at least twice. Halfway, the gateway process gets
SIGTERM and a new one starts on the same HERMES_HOME and port; the same session ids go on.
During the last round before the restart the fake Gateway answers every ingest with 503, so
those tool pairs can only reach it from the outbox of the NEXT process.

Every conversation carries a tag (``mgc07q``) in its file paths and prompts, so anything of
conversation A found in a request or a Gateway session of B is a leak. Asserted (all checks are
collected and reported together; a summary line with the numbers is printed first):
every turn answered; 0 invalid requests at the model; 0 requests over the window; context after
each compaction <= target (compact ratio x window) + 10 %; every conversation compacted >= 2
times; 0 cross-conversation leaks (requests, canvases, ingests, compactions) and exactly one
Gateway session per conversation; the canvas reached every conversation; every executed
read_file pair delivered, duplicates <= 1 %, pairs executed before the restart delivered after it;
gateway-process RSS, threads, fds and connections flat over the last rounds of one process;
on 0.22+: the canvas absent from state.db and no "already registered" warning.

A second scenario (``test_sbs_*``, one shared run) is issue 15's yardstick: the built-in
compressor as a baseline and this plugin (without a Gateway, and with the real one where it is
beside the checkout), in ONE test, on the same fake model and workload, printed side by side (tests/e2e/measure.py defines the figures); each bar of the
issue is its own test, an unmet bar an ``xfail(strict=True)`` naming the figure measured.

Skips only when this Hermes cannot run the API server (0.17.0's venv has no aiohttp).
Run: ``TDO_HERMES_VERSION=0.19.0 <hermes venv>/bin/python -m pytest -s tests/e2e/test_messaging_gateway.py``.
"""
from __future__ import annotations

import json
import re
import shutil
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Set, Tuple

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402
import measure  # noqa: E402
import real_gateway  # noqa: E402
from tests.fakes.gateway import FakeGateway  # noqa: E402
from tests.fakes.fake_llm import FakeLLM  # noqa: E402

HERMES_VERSION = harness.hermes_version() or "unknown"
CONVERSATIONS = 24
TURNS_BEFORE, TURNS_AFTER = 3, 4        # restart between them
READS_PER_TURN = 2
CONTEXT, THRESHOLD, RATIO = 64000, 0.75, 0.5
TARGET_LIMIT = int(RATIO * CONTEXT * 1.10)
GW_KEY, INSTANCE = "e2e-gateway-key", "e2e-instance"
INGEST = "/v2/offload/ingest"
CANVAS_TAG = "<current_task_context>"
CANVAS_RE = re.compile(r"<current_task_context>.*?</current_task_context>", re.S)
TAG_RE = re.compile(r"mgc(\d\d)q")
DELIVERY_WAIT = 30.0
EXPECTED = f"done: read {READS_PER_TURN} file(s)"

if not harness.hermes_bin().exists():  # pragma: no cover - wrong interpreter
    pytest.skip(f"hermes CLI not found next to {sys.executable}; run tests/e2e with the "
                "Hermes venv's python", allow_module_level=True)


def _tag(i: int) -> str:
    return f"mgc{i:02d}q"


def _newer_than_019() -> bool:
    try:
        return tuple(int(x) for x in HERMES_VERSION.split(".")[:2]) > (0, 19)
    except ValueError:
        return False


@dataclass
class Conv:
    index: int
    files: Path
    replies: List[Tuple[int, harness.ApiReply]] = field(default_factory=list)
    taken: int = 0
    reads: int = READS_PER_TURN

    @property
    def tag(self) -> str:
        return _tag(self.index)

    @property
    def session_id(self) -> str:
        return f"mgw-{self.tag}"

    @property
    def gateway_session(self) -> str:
        return "hermes-" + self.session_id

    def prompt(self, turn: int) -> str:
        # The command stays the first line (the fake model reads it there); the tag line after
        # it lands in the canvas goal, which shows a prompt's first 80 characters.
        made = harness.make_text_files(self.files, self.reads, tag=self.tag, start=self.taken)
        self.taken += self.reads
        return "DO read " + " ".join(p for p, _ in made) + f"\n[{self.tag}] turn {turn}"


def _drive(gwp: harness.GatewayProcess, convs: List[Conv], turns: range, pause: float = 0.0) -> None:
    """Every conversation runs ``turns`` one after the other (``pause`` seconds before each);
    all conversations at once."""
    def run(conv: Conv) -> None:
        for n in turns:
            time.sleep(pause)
            conv.replies.append((n, gwp.chat(conv.session_id, conv.prompt(n))))

    with ThreadPoolExecutor(len(convs)) as pool:
        list(pool.map(run, convs))


def _own_tag(ex) -> str:
    """The conversation a model request belongs to: the tag in its command's file paths, else
    the only tag it carries ('' when it carries none or several without a command)."""
    found = set(TAG_RE.findall(" ".join(ex.command[1])))
    if len(found) == 1:
        return "mgc%sq" % found.pop()
    found = set(TAG_RE.findall(harness.request_text(ex.body)))
    return "mgc%sq" % found.pop() if len(found) == 1 else ""


def _tags_in(obj) -> Set[str]:
    return {"mgc%sq" % t for t in TAG_RE.findall(json.dumps(obj, ensure_ascii=False))}


def _delivered(gw: FakeGateway, convs: List[Conv]) -> Dict[str, int]:
    """tool_call_id -> times ingested, over every conversation's Gateway session."""
    counts: Dict[str, int] = {}
    for c in convs:
        for p in gw.ingested_pairs(c.gateway_session):
            counts[p.get("tool_call_id")] = counts.get(p.get("tool_call_id"), 0) + 1
    return counts


def _require_host() -> None:
    """Skip where this suite cannot run; fail when the plugin cannot be installed."""
    if HERMES_VERSION.startswith("0.17"):
        pytest.skip("Hermes 0.17's messaging gateway is not a supported host: it wedges under "
                    "concurrent tool calls with any engine, and it shares one engine instance "
                    "between all conversations (docs/hosts.md)")
    problem = harness.api_server_problem()
    if problem:
        pytest.skip(f"hermes {HERMES_VERSION} cannot run the API server platform: {problem}")
    problem = harness.plugin_problem()
    if problem:
        pytest.fail(problem)


def test_many_conversations_one_messaging_gateway(tmp_path, capsys):
    _require_host()
    # Short file paths: the canvas goal keeps only a prompt's first 80 characters.
    files_root = Path(tempfile.mkdtemp(prefix="mg"))
    convs = [Conv(i, files_root) for i in range(CONVERSATIONS)]
    t_start = time.monotonic()
    gwp = None
    try:
        with FakeLLM() as llm, FakeGateway(api_key=GW_KEY) as gw:
            port = harness.free_port()
            env = {"TENCENTDB_OFFLOAD_GATEWAY_URL": gw.url, "TENCENTDB_OFFLOAD_API_KEY": GW_KEY,
                   "TENCENTDB_OFFLOAD_INSTANCE_ID": INSTANCE,
                   "TENCENTDB_OFFLOAD_THRESHOLD": str(THRESHOLD), "TENCENTDB_OFFLOAD_COMPACT_RATIO": str(RATIO)}
            env.update(harness.api_server_env(port))
            home = harness.make_home(tmp_path, llm.url, context_length=CONTEXT, env=env, extra_config={
                "gateway": {"api_server": {"max_concurrent_runs": 4 * CONVERSATIONS}}})
            ports = (gw.port, llm.port)
            gwp = harness.GatewayProcess(home, port)

            ready1 = gwp.start()
            _drive(gwp, convs, range(1, TURNS_BEFORE))
            gw.set_fault("5xx", paths=(INGEST,))      # the last round's pairs wait in the outbox
            _drive(gwp, convs, range(TURNS_BEFORE, TURNS_BEFORE + 1))
            time.sleep(1.0)
            before = gwp.counts(ports)
            phase1_ids = [cid for cid, name, _ in llm.tool_calls_issued if name == "read_file"]
            at_stop = _delivered(gw, convs)
            stop1 = gwp.sigterm()
            gw.clear_fault()
            ready2 = gwp.start()
            half = TURNS_BEFORE + 1 + TURNS_AFTER // 2
            _drive(gwp, convs, range(TURNS_BEFORE + 1, half))
            time.sleep(1.0)
            mid = gwp.counts(ports)       # leaks: the same process, before and after more work
            _drive(gwp, convs, range(half, TURNS_BEFORE + TURNS_AFTER + 1))
            issued = [(cid, args) for cid, name, args in llm.tool_calls_issued if name == "read_file"]
            harness.wait_for(lambda: all(_delivered(gw, convs).get(cid) for cid, _ in issued), DELIVERY_WAIT, 0.5)
            time.sleep(1.0)
            after = gwp.counts(ports)
            stop2 = gwp.sigterm()
            exchanges = llm.exchanges
            delivered = _delivered(gw, convs)
            offload = [r for r in list(gw.requests) if r.path.startswith("/v2/offload/")]
            sessions = {c.gateway_session: (gw.ingested_pairs(c.gateway_session), gw.prompts(c.gateway_session),
                                            gw.compact_calls(c.gateway_session)) for c in convs}
        wall = time.monotonic() - t_start
    finally:
        if gwp is not None:
            gwp.kill()
        shutil.rmtree(files_root, ignore_errors=True)

    checks: List[Tuple[str, bool, str]] = []

    def check(name: str, ok: bool, detail: str = "") -> None:
        checks.append((name, bool(ok), detail))

    # ---- turns
    total_turns = CONVERSATIONS * (TURNS_BEFORE + TURNS_AFTER)
    failed = [(c.tag, n, r.status, r.text[:160]) for c in convs for n, r in c.replies
              if r.status != 200 or r.text.strip() != EXPECTED]
    check("every turn answered", not failed, f"{len(failed)}/{total_turns} failed: {failed[:6]}")
    slowest = max((r.seconds for c in convs for _, r in c.replies), default=0.0)

    # ---- model wire
    by_conv: Dict[str, list] = {c.tag: [] for c in convs}
    unattributed, leaks = 0, []
    for n, ex in enumerate(exchanges):
        own = _own_tag(ex)
        if not own:
            unattributed += 1
            continue
        foreign = _tags_in(ex.body.get("messages")) - {own}
        if foreign:
            leaks.append(f"request #{n} of {own} carries {sorted(foreign)}")
        if not ex.auxiliary and own in by_conv:
            by_conv[own].append(ex)
    invalid = [(n, harness.sequence_problems(ex.messages)[:2]) for n, ex in enumerate(exchanges)
               if harness.sequence_problems(ex.messages)]
    check("0 invalid requests", not invalid, f"{len(invalid)} invalid: {invalid[:4]}")
    main = [ex for ex in exchanges if not ex.auxiliary]
    over = [ex.prompt_tokens for ex in main if ex.prompt_tokens > CONTEXT]
    check("0 requests over the window", not over, f"{len(over)} over {CONTEXT}: {sorted(over)[-5:]}")
    comps = {tag: harness.compactions([e.body for e in exs]) for tag, exs in by_conv.items()}
    afters = [c.tokens_after for cs in comps.values() for c in cs]
    high = sorted(a for a in afters if a > TARGET_LIMIT)
    check("after-compaction context <= target + 10 %", afters and not high,
          f"{len(high)}/{len(afters)} compactions left more than {TARGET_LIMIT} tokens: {high[-6:]}")
    few = {tag: len(cs) for tag, cs in comps.items() if len(cs) < 2}
    check("every conversation compacted >= 2 times", not few, f"(conversation: compactions) {few}")
    canvases = {tag: [b for e in exs for b in CANVAS_RE.findall(harness.request_text(e.body))]
                for tag, exs in by_conv.items()}
    canvas_less = [tag for tag, blocks in canvases.items() if not blocks]
    check("the canvas reached every conversation", not canvas_less, f"never in a request of {canvas_less}")
    # a canvas names its own conversation's files, so the leak check above covers canvases too
    untagged = sum(1 for tag, blocks in canvases.items() for b in blocks if tag not in _tags_in(b))
    foreign_canvas = sum(1 for tag, blocks in canvases.items() for b in blocks if _tags_in(b) - {tag})
    canvas_count = sum(len(b) for b in canvases.values())
    check("every canvas names its own conversation", not untagged,
          f"{untagged}/{canvas_count} canvas blocks carry no tag of their conversation (leak check blind)")

    # ---- Gateway side
    for c in convs:
        pairs, prompts, compacts = sessions[c.gateway_session]
        for what, obj in (("ingested pairs", pairs), ("prompts", prompts),
                          ("compact requests", [req for req, _ in compacts])):
            foreign = _tags_in(obj) - {c.tag}
            if foreign:
                leaks.append(f"Gateway session {c.gateway_session}: {what} carry {sorted(foreign)}")
    check("0 cross-conversation leaks", not leaks, f"{len(leaks)}: {leaks[:6]}")
    used = sorted({r.body.get("session_id") for r in offload if isinstance(r.body, dict)})
    expected = sorted(c.gateway_session for c in convs)
    check("one Gateway session per conversation", used == expected,
          f"unexpected {sorted(set(used) - set(expected))[:6]}, unused {sorted(set(expected) - set(used))[:6]}")
    owner = {cid: _tags_in(args).pop() for cid, args in issued if _tags_in(args)}
    misfiled = [(cid, owner.get(cid), s) for s, (pairs, _, _) in sessions.items() for p in pairs
                for cid in [p.get("tool_call_id")] if owner.get(cid) and s != f"hermes-mgw-{owner[cid]}"]
    check("pairs filed under their own conversation", not misfiled, f"{misfiled[:6]}")
    missing = [cid for cid, _ in issued if not delivered.get(cid)]
    check("every executed pair delivered", not missing, f"{len(missing)}/{len(issued)} missing: {missing[:8]}")
    dups = sum(n - 1 for n in delivered.values() if n > 1)
    dup_share = dups / max(1, len(issued))
    pending = [cid for cid in phase1_ids if not at_stop.get(cid)]
    dup_ids = {cid: n for cid, n in delivered.items() if n > 1}
    # where each extra copy came from: the process before the restart, the one after, or a
    # resend across the restart (at-least-once, allowed within the 1 %)
    first = sum(max(0, at_stop.get(cid, 0) - 1) for cid in dup_ids)
    second = sum(max(0, n - at_stop.get(cid, 0) - 1) for cid, n in dup_ids.items())
    check("duplicates <= 1 %", dup_share <= 0.01,
          f"{dups} duplicate ingests of {len(issued)} pairs: {first} sent twice by the first process, "
          f"{second} by the second, {dups - first - second} resent across the restart; "
          f"{sorted(dup_ids.items())[:8]}")
    late_missing = [cid for cid in pending if not delivered.get(cid)]
    check("pairs executed before the restart delivered after it", pending and not late_missing,
          f"{len(pending)} undelivered at SIGTERM, {len(late_missing)} of them never delivered: {late_missing[:8]}")

    # ---- the process
    # The second process serves the second half with the longer histories (measured +10.2 and
    # +10.3 % over the first on two runs): a leak is growth within one process, as below.
    check("RSS flat over the last rounds of one process", after.rss_kb <= mid.rss_kb * 1.10,
          f"{mid.rss_kb / 1024:.1f} MB -> {after.rss_kb / 1024:.1f} MB "
          f"(first process: {before.rss_kb / 1024:.1f} MB)")
    # Threads and fds follow the host's pools and what they did (the first process spent its
    # last round with the Gateway refusing): compare the second process with itself.
    check("no thread leak", after.threads <= mid.threads * 1.10 + 2,
          f"{mid.threads} -> {after.threads} over the last {TURNS_AFTER - TURNS_AFTER // 2} rounds")
    check("no fd leak", after.fds <= mid.fds * 1.10 + 4,
          f"{mid.fds} -> {after.fds} over the last {TURNS_AFTER - TURNS_AFTER // 2} rounds")
    # The plugin keeps one keep-alive connection per thread that talked to the Gateway, so the
    # count follows the host's worker threads, never the number of agents or conversations.
    check("no Gateway connection leak", after.conns[gw.port] <= after.threads,
          f"{after.conns[gw.port]} connections to the Gateway with {after.threads} threads alive "
          f"(before the restart: {before.conns[gw.port]} with {before.threads})")
    canvas_rows = harness.state_db_contains(home, CANVAS_TAG)
    registered = harness.log_lines(home, "already registered", extra=[gwp.output])
    if _newer_than_019():
        check("canvas absent from state.db", canvas_rows == 0, f"{CANVAS_TAG} found {canvas_rows} times in state.db")
        check("no 'already registered' warnings", not registered, f"{len(registered)}: {registered[:3]}")

    compaction_total = sum(len(cs) for cs in comps.values())
    summary = (
        f"MESSAGING-GATEWAY hermes={HERMES_VERSION} conversations={CONVERSATIONS} "
        f"turns={total_turns - len(failed)}/{total_turns} requests={len(exchanges)} (main {len(main)}, "
        f"unattributed {unattributed}) invalid={len(invalid)} over_window={len(over)} "
        f"max_request={max((e.prompt_tokens for e in main), default=0)} compactions={compaction_total} "
        f"after_compaction_max={max(afters, default=0)} (limit {TARGET_LIMIT}) leaks={len(leaks)} "
        f"canvases={canvas_count} (without own tag {untagged}, with a foreign one {foreign_canvas}) "
        f"gateway_sessions={len(used)} pairs={len(issued)} delivered={len(issued) - len(missing)} "
        f"duplicates={dups} ({dup_share:.1%}) undelivered_at_restart={len(pending)} "
        f"lost_across_restart={len(late_missing)} canvas_in_state_db={canvas_rows} "
        f"already_registered={len(registered)} before_restart[{before.describe()}] "
        f"mid[{mid.describe()}] after_restart[{after.describe()}] start={ready1:.1f}s/{ready2:.1f}s stop={stop1:.1f}s/{stop2:.1f}s "
        f"slowest_turn={slowest:.1f}s wall={wall:.0f}s")
    with capsys.disabled():  # the numbers show in every run's output, passed or failed
        print("\n" + summary, flush=True)
    bad = [f"FAIL {name}: {detail}" for name, ok, detail in checks if not ok]
    assert not bad, "\n".join([summary] + bad + [gwp.output_tail(1500), harness.log_excerpt(home, limit=15)])


# --------------------------------------------------------------------------- side by side
# Issue 15's yardstick: the built-in compressor and this plugin, at the same time in ONE
# test (one gateway process per arm), on the same fake model and the same workload: SBS_CONVERSATIONS conversations at once,
# SBS_TURNS turns each (a restart halfway), every turn a parallel read of SBS_READS files of
# ~25 KB (~18.9K tokens of tool results), 64K window (the host's minimum): each conversation
# offers > 2 windows. The plugin runs without a Gateway and, where ``../shared/gateway`` is
# beside the checkout, with the real TencentDB Gateway (issue 29), whose /compact takes
# seconds, so 0.22's 4-worker compression pool fills as it does for real.
# The figures are defined in tests/e2e/measure.py; each bar is its own test on one shared run.
SBS_CONVERSATIONS, SBS_TURNS, SBS_READS = 8, 7, 3
SBS_EXPECTED = f"done: read {SBS_READS} file(s)"
# the plugin runs with its defaults (0.75 of this 64K window in every host's messaging
# gateway); no landing may end over it
PLUGIN_TRIGGER = int(THRESHOLD * CONTEXT)


@dataclass(frozen=True)
class Shape:
    """One side-by-side's window, conversations, turns each, and the plugin's trigger bar."""
    window: int = CONTEXT
    conversations: int = SBS_CONVERSATIONS
    turns: int = SBS_TURNS
    trigger: int = PLUGIN_TRIGGER


POOL_SATURATED = "compression pool saturated"
NO_PROGRESS = "compression made insufficient progress"


def _distinct(lines: List[str]) -> int:
    """Log lines counted once even when both agent.log and errors.log carry them."""
    return len({line.split(": ", 1)[-1] for line in lines})


def _run_engine(engine: str, tmp: Path, pause: float = 0.0, ttl: int = 0, gateway_url: str = "off",
                shape: Shape = Shape()):
    """One engine's whole messaging-gateway run -> measure.Row. ``engine``: "builtin", or a name
    starting with "plugin"; the plugin talks to the Gateway at ``gateway_url`` (the real one;
    "off": none). With ``ttl``: ``pause`` seconds before every turn, the plugin's cache
    TTL and the built-in's idle compaction set to it, and the cost priced with a cache that
    expires after ``ttl`` seconds idle. ``shape``: the window and workload."""
    plugin = engine.startswith("plugin")
    files_root = Path(tempfile.mkdtemp(prefix="sb"))
    convs = [Conv(i, files_root, reads=SBS_READS) for i in range(shape.conversations)]
    gwp = None
    t0 = time.monotonic()
    try:
        with FakeLLM() as llm:
            home, port = harness.engine_home(
                tmp, "plugin" if plugin else engine, llm.url, window=shape.window,
                concurrent_runs=4 * shape.conversations,
                settings={"TENCENTDB_OFFLOAD_GATEWAY_URL": gateway_url,
                          "TENCENTDB_OFFLOAD_API_KEY": GW_KEY,
                          "TENCENTDB_OFFLOAD_INSTANCE_ID": INSTANCE,
                          **({"TENCENTDB_OFFLOAD_CACHE_TTL_S": str(ttl)} if ttl else {})},
                compression={"idle_compact_after_seconds": ttl} if ttl else {})
            gwp = harness.GatewayProcess(home, port)
            gwp.start()
            half = shape.turns // 2
            _drive(gwp, convs, range(1, half + 1), pause)
            gwp.sigterm()
            gwp.start()
            _drive(gwp, convs, range(half + 1, shape.turns + 1), pause)
            gwp.sigterm()
            exchanges = llm.exchanges
            issued = llm.tool_calls_issued
        wall = time.monotonic() - t0
        by_conv: Dict[str, list] = {c.tag: [] for c in convs}
        unattributed = 0
        for ex in exchanges:
            own = _own_tag(ex)
            if own in by_conv:
                by_conv[own].append(ex)
            else:
                unattributed += 1
        reads: Dict[str, Dict[str, str]] = {c.tag: {} for c in convs}
        for cid, name, args in issued:
            owner = _tags_in(args)
            if name == "read_file" and len(owner) == 1 and owner <= set(reads):
                reads[owner.pop()][cid] = args["path"]
        replies = [r for c in convs for _, r in c.replies]
        answered = sum(1 for r in replies if r.status == 200 and r.text.strip() == SBS_EXPECTED)
        seconds = sorted(r.seconds for r in replies)
        p95 = seconds[min(len(seconds) - 1, int(0.95 * len(seconds)))] if seconds else 0.0
        logs = [gwp.output]
        extra_figures = {
            "turn latency p50 / p95": f"{measure.median(seconds):.1f} / {p95:.1f} s",
            "'pool saturated' / 'insufficient progress' log lines":
                f"{_distinct(harness.log_lines(home, POOL_SATURATED, extra=logs))} / "
                f"{_distinct(harness.log_lines(home, NO_PROGRESS, extra=logs))}",
            "unattributed requests": str(unattributed),
            "wall time": f"{wall:.0f} s",
        }
        failed = [(c.tag, n, r.status, r.text[:120]) for c in convs for n, r in c.replies
                  if r.status != 200 or r.text.strip() != SBS_EXPECTED]
        row = measure.analyse(engine, by_conv, window=shape.window,
                              trigger=shape.trigger if plugin else measure.builtin_trigger(shape.window),
                              turns=len(replies), answered=answered, failed=failed, reads=reads,
                              extra=extra_figures, ttl=ttl or None)
        return row
    finally:
        if gwp is not None:
            gwp.kill()
        shutil.rmtree(files_root, ignore_errors=True)


def _run_sbs_arm(engine: str, tmp: Path, gateway_url: str = "off") -> measure.Row:
    """The side-by-side's arms: the plugin without a Gateway, or with the real one."""
    return _run_engine(engine, tmp, gateway_url=gateway_url)


@pytest.fixture(scope="module")
def sbs(tmp_path_factory, request):
    """Every arm's row from one run (all at once: the built-in, the plugin without a Gateway,
    and with the real Gateway where it is beside the checkout), printed side by side."""
    _require_host()
    arms = {e: (e, tmp_path_factory.mktemp(e)) for e in ("builtin", "plugin")}
    rows = real_gateway.at_once_with_gateway(_run_sbs_arm, arms, tmp_path_factory,
                                              real_gateway.CURRENT_HOST)
    measure.show(request, f"MESSAGING-GATEWAY SIDE-BY-SIDE hermes={HERMES_VERSION}: {SBS_CONVERSATIONS} "
                 f"conversations x {SBS_TURNS} turns ({SBS_READS} reads of ~25 KB each), {CONTEXT:,} window, "
                 "restart halfway; the plugin without a Gateway and with the real one", list(rows.values()))
    return rows


@pytest.fixture(params=["plugin", real_gateway.ARM])
def sbs_plugin(request, sbs):
    """The plugin's row without a Gateway, then with the real one (skipped where absent)."""
    return sbs["plugin"] if request.param == "plugin" else real_gateway.arm(sbs, real_gateway.CURRENT_HOST)


def test_sbs_workload_is_a_fair_baseline(sbs):
    """Every conversation offers >= 2 windows, the built-in answers every turn, every request
    belongs to one conversation."""
    measure.assert_fair_baseline(sbs, CONTEXT)
    assert all(row.extra["unattributed requests"] == "0" for row in sbs.values()), sbs["plugin"].extra


def test_sbs_plugin_answers_every_turn(sbs_plugin):
    measure.assert_answers_every_turn(sbs_plugin)


def test_sbs_plugin_never_over_the_window(sbs_plugin):
    measure.assert_never_over_the_window(sbs_plugin)


def test_sbs_plugin_every_request_at_most_090_of_the_window(sbs_plugin):
    measure.assert_every_request_under_the_headroom(sbs_plugin)


def test_sbs_plugin_never_over_the_trigger_after_a_compaction(sbs_plugin):
    measure.assert_never_over_the_trigger_after_a_compaction(sbs_plugin)


@measure.unmet_on(["0.19"], "issue 29: files no request carried whole, 48 vs 0 on 0.19, where the built-in "
                  "runs to 1.15 of the window (16 of its 112 requests over it)")
def test_sbs_plugin_hides_no_more_fresh_results_than_the_builtin(sbs, sbs_plugin):
    measure.assert_hides_no_more(sbs_plugin, sbs["builtin"])


def test_sbs_plugin_rewrites_no_more_than_the_builtin(sbs, sbs_plugin):
    """No more than the built-in's, or than the fewest any engine needs at <= 0.90 of the
    window with every read whole (the built-in makes fewer by running to 0.97 of it). One
    rewrite more in the whole run: 8 conversations share the host's compression pool on 2
    cores, and a compaction it refuses twice can cost one conversation a second cut."""
    measure.assert_rewrites_within(sbs_plugin, sbs["builtin"], extra=1)


def test_sbs_plugin_costs_no_more_than_the_builtin(sbs, sbs_plugin):
    measure.assert_cost_within(sbs_plugin, sbs["builtin"])


# Issue 55's bars on Hermes 0.22 (0.19 keeps the bars above): every read shown whole, rewrites
# at most the floor + 0.5, cost at most 0.95x the built-in's (its hidden reads priced as read
# again), the real Gateway's arm at most the arm without one.
MESSAGING_COST_SHARE = 0.95


@pytest.fixture
def current_sbs(sbs):
    return measure.for_issue_55(sbs)


def test_sbs_plugin_shows_every_read_whole(current_sbs, sbs_plugin):
    """On a 64K window the turn start compacts before a step that would pass the ceiling, and a
    mid-turn compaction (the pool refused the turn start's) keeps the step's reads whole."""
    measure.assert_hides_none(sbs_plugin)


@measure.unmet_on(measure.ISSUE_55, "issue 55: 3.0 rewrites per conversation, the floor (3.0), over the "
                  "built-in's 2.0, which sends requests at 0.97 of the window (2026-12-07)")
def test_sbs_plugin_rewrites_near_the_floor(current_sbs, sbs_plugin):
    measure.assert_rewrites_near_the_floor(sbs_plugin, current_sbs["builtin"])


def test_sbs_plugin_costs_at_most_095_of_the_builtin(current_sbs, sbs_plugin):
    measure.assert_cost_within(sbs_plugin, current_sbs["builtin"], MESSAGING_COST_SHARE)


@measure.unmet_on(measure.ISSUE_55, "issue 55: 1.007x-1.010x (2026-12-07; 1.012x-1.017x before the "
                  "canvas read a third shorter): both arms land on the system prompt and tools; what "
                  "is left is the Gateway's task canvas, written at each compaction (with it off, "
                  "0.999x)")
def test_sbs_real_gateway_costs_no_more_than_without_a_gateway(current_sbs):
    """Its /compact reply is taken only where it lands as deep as the local plan."""
    measure.assert_cost_within(real_gateway.arm(current_sbs, real_gateway.CURRENT_HOST),
                               current_sbs["plugin"], 1.00)
