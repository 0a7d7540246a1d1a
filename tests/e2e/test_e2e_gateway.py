"""End-to-end: the plugin WITH a (fake) TencentDB Gateway inside the real ``hermes chat`` CLI.

Scenario 1 (healthy Gateway): read turns fill a 64K window, with a ``HEARTBEAT check`` turn
in between, until the engine has compacted (through the Gateway's ``/compact``), then a
recall of the first ``read_file`` result. Asserted on both wires:
- Gateway: one ``hermes-…`` session for the whole conversation; every read_file pair ingested
  exactly once with a ``YYYY-MM-DDTHH:MM:SS.mmmZ`` call-time stamp; one prompt ingest per user
  turn and none for the heartbeat; at least one ``/compact``; auth headers on every request.
- Model: valid sequences, no request over the window, at most one compaction per turn, the
  ``<current_task_context>`` canvas reaches the model and never twice in one request, the
  recalled text holds the needle.

Scenario 2 (Gateway refuses connections until the last turn): turns complete quickly, the
budget holds through a local compaction, and after recovery the outbox delivers every queued
pair exactly once. (A replayed pair may carry its delivery time instead of its call time: the
Gateway files a pair under the last task boundary whose timestamp sorts before the pair's, and
the boundary of a prompt delivered late is the Gateway's clock at delivery.)
"""
from __future__ import annotations

import re
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402
from tests.fakes.fake_llm import FakeLLM  # noqa: E402

HERMES_VERSION = harness.hermes_version() or "unknown"
CONTEXT = 64000
THRESHOLD = 0.75
RATIO = 0.5
GW_KEY = "e2e-gateway-key"
INSTANCE = "e2e-instance"
HEARTBEAT = "HEARTBEAT check"
CANVAS_TAG = "<current_task_context>"
TS_RE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
DELIVERY_WAIT = 10.0
MAX_TURN_SECONDS = 60  # a refused Gateway must not stall a turn (normal turn: 5-7 s)

if not harness.hermes_bin().exists():  # pragma: no cover - wrong interpreter
    pytest.skip(f"hermes CLI not found next to {sys.executable}; run tests/e2e with the "
                "Hermes venv's python", allow_module_level=True)


def _fake_gateway_class():
    try:
        from tests.fakes.gateway import FakeGateway
    except Exception as exc:  # the fake is written in parallel; say so instead of erroring
        pytest.fail(f"tests/fakes/gateway/ is not usable: {exc!r}")
    return FakeGateway


def _setup(tmp_path, llm, gw):
    problem = harness.plugin_problem()
    if problem:
        pytest.fail(problem)
    return harness.make_home(tmp_path, llm.url, context_length=CONTEXT, env={
        "TENCENTDB_OFFLOAD_GATEWAY_URL": gw.url,
        "TENCENTDB_OFFLOAD_API_KEY": GW_KEY,
        "TENCENTDB_OFFLOAD_INSTANCE_ID": INSTANCE,
        "TENCENTDB_OFFLOAD_THRESHOLD": str(THRESHOLD),
        "TENCENTDB_OFFLOAD_COMPACT_RATIO": str(RATIO),
    })


def _offload_requests(gw):
    return [r for r in list(gw.requests) if r.path.startswith("/v2/offload/")]


def _the_session(gw) -> str:
    """The one Gateway session id the plugin used for the conversation."""
    ids = sorted({r.body.get("session_id") for r in _offload_requests(gw) if isinstance(r.body, dict)})
    assert ids, ("the plugin sent nothing to the Gateway (no /v2/offload/* request); "
                 f"Gateway saw: {[(r.method, r.path, r.status) for r in list(gw.requests)][:20]}")
    assert len(ids) == 1, f"one Hermes conversation must map to ONE Gateway session, got {ids}"
    assert str(ids[0]).startswith("hermes-"), f"Gateway session id should start with 'hermes-': {ids[0]!r}"
    return ids[0]


def _read_ids(llm):
    return [cid for cid, name, _ in llm.tool_calls_issued if name == "read_file"]


def _pair_counts(gw, sid):
    counts = {}
    for p in gw.ingested_pairs(sid):
        counts[p.get("tool_call_id")] = counts.get(p.get("tool_call_id"), 0) + 1
    return counts


def _all_delivered(gw, sid, ids):
    counts = _pair_counts(gw, sid)
    return all(counts.get(i, 0) >= 1 for i in ids)


def _check_pairs(gw, sid, read_ids, t_start, t_end):
    pairs = gw.ingested_pairs(sid)
    counts = _pair_counts(gw, sid)
    missing = [i for i in read_ids if counts.get(i, 0) == 0]
    twice = {i: counts[i] for i in read_ids if counts.get(i, 0) > 1}
    assert not missing, f"read_file pairs never reached the Gateway: {missing} (got {sorted(counts)})"
    assert not twice, f"read_file pairs ingested more than once: {twice}"
    by_id = {p.get("tool_call_id"): p for p in pairs}
    for cid in read_ids:
        p = by_id[cid]
        assert p.get("tool_name") == "read_file", p.get("tool_name")
        ts = p.get("timestamp")
        assert isinstance(ts, str) and TS_RE.match(ts), f"pair {cid}: timestamp {ts!r} not YYYY-MM-DDTHH:MM:SS.mmmZ"
        when = datetime.strptime(ts, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc).timestamp()
        assert t_start - 2 <= when <= t_end + 2, f"pair {cid}: timestamp {ts} outside the test run (UTC?)"
    return by_id


def _check_auth(gw):
    bad = [(r.path, r.status) for r in _offload_requests(gw)
           if r.headers.get("authorization") != f"Bearer {GW_KEY}" or r.headers.get("x-tdai-service-id") != INSTANCE]
    assert not bad, f"Gateway requests without the configured Bearer key / x-tdai-service-id: {bad[:5]}"
    rejected = [(r.path, r.status) for r in _offload_requests(gw) if r.status is not None and 400 <= r.status < 500]
    assert not rejected, f"the Gateway rejected plugin requests as invalid (4xx): {rejected[:5]}"


@pytest.mark.parametrize("hermes", [HERMES_VERSION], ids=lambda v: f"hermes-{v}")
def test_gateway_mode_end_to_end(tmp_path, hermes):
    FakeGateway = _fake_gateway_class()
    supply = harness.FileSupply(tmp_path / "files", tag="gw")
    t_start = time.time()
    with FakeLLM() as llm, FakeGateway(api_key=GW_KEY) as gw:
        home = _setup(tmp_path, llm, gw)
        conv = harness.Conversation(llm, home)

        harness.read_files_turn(conv, supply.take(3))
        harness.assert_engine_used(conv)
        beat = conv.say(HEARTBEAT)
        harness.check_turn(beat, "text", f"ok: {HEARTBEAT}")
        harness.fill_until_compactions(conv, supply, needed=2, threshold_tokens=int(CONTEXT * THRESHOLD),
                                       context_length=CONTEXT)
        call_id, args = harness.first_read_call(llm)
        needle = dict(supply.files)[args["path"]]
        recall = conv.say(f"DO recall {call_id}")
        harness.check_turn(recall, "recall", "recalled: ")
        print(f"hermes {hermes}, {len(conv.turns)} turns:\n{conv.summary()}")  # shown with -rP / on failure

        sid = _the_session(gw)
        read_ids = _read_ids(llm)
        harness.wait_for(lambda: _all_delivered(gw, sid, read_ids), DELIVERY_WAIT)
        prompts = gw.prompts(sid)
        compacts = gw.compact_calls(sid)
        _check_auth(gw)
        _check_pairs(gw, sid, read_ids, t_start, time.time())

    # prompts: exactly one per user turn, none for the heartbeat
    user_turns = [t for t in conv.turns if t.prompt != HEARTBEAT]

    def matches(p, prompt):
        p = (p or "").strip()
        return bool(p) and (p.startswith(prompt[:200]) or prompt.startswith(p[:200]))

    per_turn = {t.number: sum(1 for p in prompts if matches(p, t.prompt)) for t in user_turns}
    assert all(c == 1 for c in per_turn.values()), (
        f"expected exactly one prompt ingest per user turn, got (turn: count) {per_turn}; prompts: "
        f"{[str(p)[:60] for p in prompts]}")
    assert not [p for p in prompts if "HEARTBEAT" in str(p)], f"heartbeat prompt was ingested: {prompts}"
    extra = [p for p in prompts if not any(matches(p, t.prompt) for t in user_turns)]
    assert not extra, f"prompt ingests that match no user turn: {[str(p)[:80] for p in extra]}"

    assert compacts, f"no compaction went through the Gateway (/v2/offload/compact never called)\n{conv.summary()}"

    harness.assert_engine_used(conv)
    harness.assert_all_valid(llm)
    harness.assert_budget(conv, CONTEXT)
    harness.assert_history_continuity(conv, int(CONTEXT * THRESHOLD))
    assert conv.compactions_by_turn(), f"no compaction visible on the model's wire\n{conv.summary()}"
    harness.assert_no_loop(conv)
    breaks = harness.prefix_breaks(conv)   # one process per turn: the compacted prefix holds
    assert not breaks, "\n".join(breaks) + "\n" + conv.summary()

    canvases = [(n, harness.request_text(e.body).count(CANVAS_TAG)) for n, e in conv.main_with_turns()]
    assert any(c for _, c in canvases), (f"no {CANVAS_TAG} block ever reached the model "
                                         f"(Gateway canvas files: {sorted(p.name for p in gw.session_dir(sid).glob('mmds/*'))})")
    doubled = [(n, c) for n, c in canvases if c > 1]
    assert not doubled, f"{CANVAS_TAG} appears more than once in one request (turn, count): {doubled}"

    harness.assert_recalled(conv, recall, needle)

    # the compaction's path and level show in the plugin's status (read from its store)
    import json
    proc = harness.plugin_cli(home, "status", "--json")
    assert proc.returncode == 0, proc.stderr
    status = json.loads(proc.stdout)["compactions"]
    assert status["gateway"] >= 1, status
    assert set(status["levels"]) & {"mild", "aggressive", "emergency", "replay", "fastpath"}, status


@pytest.mark.parametrize("hermes", [HERMES_VERSION], ids=lambda v: f"hermes-{v}")
def test_gateway_refusing_then_recovering(tmp_path, hermes):
    FakeGateway = _fake_gateway_class()
    supply = harness.FileSupply(tmp_path / "files", tag="down")
    t_start = time.time()
    with FakeLLM() as llm, FakeGateway(api_key=GW_KEY) as gw:
        gw.set_fault("refuse")
        home = _setup(tmp_path, llm, gw)
        conv = harness.Conversation(llm, home)

        harness.read_files_turn(conv, supply.take(3))
        harness.assert_engine_used(conv)
        harness.fill_until_compactions(conv, supply, needed=1, min_observed=1,
                                       threshold_tokens=int(CONTEXT * THRESHOLD), context_length=CONTEXT)
        outage_ids = _read_ids(llm)
        outage_turns = list(conv.turns)
        gw.clear_fault()

        call_id, args = harness.first_read_call(llm)
        needle = dict(supply.files)[args["path"]]
        recall = conv.say(f"DO recall {call_id}")
        harness.check_turn(recall, "recall", "recalled: ")
        print(f"hermes {hermes}, {len(conv.turns)} turns:\n{conv.summary()}")  # shown with -rP / on failure

        slow = [(t.number, round(t.result.seconds, 1)) for t in outage_turns if t.result.seconds > MAX_TURN_SECONDS]
        assert not slow, f"turns stalled while the Gateway refused connections (turn, s): {slow}"
        assert outage_ids, "no read_file call happened during the outage"
        sid = _the_session(gw)
        delivered = harness.wait_for(lambda: _all_delivered(gw, sid, outage_ids), DELIVERY_WAIT)
        counts = _pair_counts(gw, sid)
        assert delivered, (f"after recovery (+{DELIVERY_WAIT:.0f}s) the outbox did not deliver every pair queued "
                           f"during the outage: missing {[i for i in outage_ids if not counts.get(i)]}")
        _check_pairs(gw, sid, outage_ids, t_start, time.time())
        _check_auth(gw)

    harness.assert_engine_used(conv)
    harness.assert_all_valid(llm)
    harness.assert_budget(conv, CONTEXT)
    harness.assert_history_continuity(conv, int(CONTEXT * THRESHOLD))
    outage_numbers = {t.number for t in outage_turns}
    assert any(n in outage_numbers for n in conv.compactions_by_turn()), (
        f"no compaction during the outage, so the budget was never tested without the Gateway\n{conv.summary()}")
    harness.assert_no_loop(conv)
    harness.assert_recalled(conv, recall, needle)
