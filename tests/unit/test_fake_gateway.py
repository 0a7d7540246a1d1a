"""Tests of the fake Gateway itself (tests/fakes/gateway/), over real sockets.

The plugin's tests trust this fake to behave like the real Gateway described in
the shared gateway-contract.md research notes, so every behaviour and fault is pinned here.
"""
from __future__ import annotations

import gzip
import hashlib
import http.client
import json
import re
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import zlib
from datetime import datetime, timezone
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:  # for ``tests.fakes``; appended so nothing is shadowed
    sys.path.append(str(REPO_ROOT))

from tests.fakes.gateway import FakeGateway, estimate_message_tokens  # noqa: E402
from helpers import wait_for  # noqa: E402

INGEST, COMPACT, QUERY = "/v2/offload/ingest", "/v2/offload/compact", "/v2/offload/query-mmd"
AUTH = {"Authorization": "Bearer test-key", "X-TDAI-Service-Id": "svc-1"}
REQ_ID = re.compile(r"^req-[0-9a-f]{16}$")
ISO_MS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
REF_LINE = '原始工具结果已存档，如需查看完整内容请调用 tdai_read_cos(path="{}")'


# ─── helpers ─────────────────────────────────────────────────────────────────

def send(gw, path, body=None, *, method=None, headers=None, raw=None, timeout=5.0):
    """One HTTP exchange via urllib. Returns (status, parsed JSON or raw bytes, headers)."""
    hdrs = dict(AUTH) if headers is None else dict(headers)
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    if data is not None:
        hdrs.setdefault("Content-Type", "application/json")
    req = urllib.request.Request(gw.url + path, data=data, headers=hdrs,
                                 method=method or ("GET" if data is None else "POST"))
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            status, payload, rh = r.status, r.read(), r.headers
    except urllib.error.HTTPError as e:
        status, payload, rh = e.code, e.read(), e.headers
    try:
        return status, json.loads(payload), rh
    except ValueError:
        return status, payload, rh


def post(gw, path, body, **kw):
    status, payload, _ = send(gw, path, body, **kw)
    return status, payload


def now_ts() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def pair(tcid, result, *, ts=None, tool="read_file", params=None, **extra):
    p = {"tool_name": tool, "tool_call_id": tcid, "params": params if params is not None else {"path": f"/srv/{tcid}.py"},
         "result": result, "timestamp": ts or now_ts()}
    p.update(extra)
    return p


def ingest_prompt(gw, sid, prompt):
    assert post(gw, INGEST, {"session_id": sid, "tool_pairs": [], "prompt": prompt})[0] == 200


def ingest_pairs(gw, sid, *pairs):
    assert post(gw, INGEST, {"session_id": sid, "tool_pairs": list(pairs)})[0] == 200


def openai_convo(results: list[str], *, prefix="call_"):
    """system, user, one assistant tool call + tool result per result, final text, new user prompt."""
    msgs = [{"role": "system", "content": "You are a coding agent."},
            {"role": "user", "content": "Refactor the API module"}]
    for i, res in enumerate(results):
        msgs.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": f"{prefix}{i}", "type": "function",
             "function": {"name": "read_file", "arguments": json.dumps({"path": f"/srv/{prefix}{i}.py"})}}]})
        msgs.append({"role": "tool", "tool_call_id": f"{prefix}{i}", "content": res})
    msgs += [{"role": "assistant", "content": "Done reading."}, {"role": "user", "content": "Now write tests"}]
    return msgs


def compact(gw, sid, msgs, *, ratio_of_window, message_tokens=None, ratio_field=None):
    """Compact with total_tokens = Σ estimates and a window making total/window = ratio_of_window."""
    total = sum(message_tokens) if message_tokens else sum(estimate_message_tokens(m) for m in msgs)
    cw = max(1, round(total / ratio_of_window))
    body = {"session_id": sid, "messages": msgs, "ratio": min(2, ratio_of_window) if ratio_field is None else ratio_field,
            "context_window": cw, "total_tokens": total}
    if message_tokens is not None:
        body["message_tokens"] = message_tokens
    status, payload = post(gw, COMPACT, body)
    assert status == 200, payload
    assert payload["code"] == 0 and REQ_ID.match(payload["request_id"])
    return payload["data"]




@pytest.fixture
def gw():
    with FakeGateway() as g:
        yield g


# ─── transport, auth, envelopes ──────────────────────────────────────────────

def test_health_is_unauthenticated_raw_object(gw):
    status, body, _ = send(gw, "/health", headers={})
    assert status == 200
    assert body["status"] == "ok" and isinstance(body["version"], str) and isinstance(body["uptime"], int)
    assert "code" not in body and "stores" in body and "services" in body
    assert gw.requests[-1].method == "GET" and gw.requests[-1].status == 200


def test_unknown_routes_are_404_and_auth_comes_first(gw):
    assert post(gw, "/v2/offload/read-ref", {"session_id": "s"}) == (404, {"error": "Not found: POST /v2/offload/read-ref"})
    assert send(gw, "/v2/offload/health")[:2] == (404, {"error": "Not found: GET /v2/offload/health"})
    assert send(gw, INGEST)[:2] == (404, {"error": f"Not found: GET {INGEST}"})
    assert send(gw, "/nope", headers={})[:2] == (404, {"error": "Not found: GET /nope"})
    # The offload router authenticates before it routes (so the official client's
    # health probe on /v2/offload/health sees 401 without a key).
    status, body = post(gw, "/v2/offload/read-ref", {"session_id": "s"}, headers={})
    assert status == 401 and body["code"] == 401


def test_trailing_slash_is_tolerated(gw):
    status, body = post(gw, QUERY + "/", {"session_id": "s1"})
    assert status == 200 and body["data"] == {"mmds": [], "currentMmd": None}


@pytest.mark.parametrize("headers, message", [
    ({"X-TDAI-Service-Id": "svc"}, "Missing or invalid Authorization header. Expected: Bearer {api_key}"),
    ({"Authorization": "Basic abc", "X-TDAI-Service-Id": "svc"},
     "Missing or invalid Authorization header. Expected: Bearer {api_key}"),
    ({"Authorization": "Bearer   ", "X-TDAI-Service-Id": "svc"},
     "Missing or invalid Authorization header. Expected: Bearer {api_key}"),
    ({"Authorization": "Bearer k"}, "Missing x-tdai-service-id header"),
    ({"Authorization": "Bearer k", "X-TDAI-Service-Id": "  "}, "Missing x-tdai-service-id header"),
])
def test_offload_auth_envelopes(gw, headers, message):
    status, body = post(gw, QUERY, {"session_id": "s1"}, headers=headers)
    assert status == 401
    assert body["code"] == 401 and body["message"] == message and REQ_ID.match(body["request_id"])
    assert "data" not in body


def test_header_names_are_case_insensitive(gw):
    hdrs = {"authorization": "Bearer k", "x-TDAI-service-ID": "svc"}
    assert post(gw, QUERY, {"session_id": "s1"}, headers=hdrs)[0] == 200


def test_api_key_must_match_when_configured():
    with FakeGateway(api_key="sekret") as g:
        ok = {"Authorization": "Bearer sekret", "x-tdai-service-id": "svc"}
        assert post(g, QUERY, {"session_id": "s"}, headers=ok)[0] == 200
        status, body = post(g, QUERY, {"session_id": "s"}, headers={**ok, "Authorization": "Bearer wrong"})
        assert (status, body["message"]) == (401, "Unauthorized: invalid token")
        status, body = post(g, QUERY, {"session_id": "s"}, headers={"x-tdai-service-id": "svc"})
        assert (status, body["message"]) == (401, "Unauthorized: missing Bearer token")
        assert send(g, "/health", headers={})[0] == 200  # health never needs the key


def test_success_envelope_and_recording(gw):
    body = {"session_id": "hermes:s1", "tool_pairs": [], "prompt": "Hello there"}
    status, payload, rh = send(gw, INGEST, body)
    assert status == 200 and set(payload) == {"code", "message", "request_id", "data"}
    assert payload["code"] == 0 and payload["message"] == "ok" and payload["data"] == {}
    assert REQ_ID.match(payload["request_id"])
    assert rh["Content-Type"].startswith("application/json") and int(rh["Content-Length"]) > 0
    rec = gw.requests[-1]
    assert (rec.method, rec.path, rec.body, rec.status) == ("POST", INGEST, body, 200)
    assert rec.headers["x-tdai-service-id"] == "svc-1" and rec.headers["authorization"] == "Bearer test-key"
    assert all(k == k.lower() for k in rec.headers)


@pytest.mark.parametrize("encoding, compress", [
    ("gzip", gzip.compress), ("x-gzip", gzip.compress), ("deflate", zlib.compress),
    ("deflate", lambda b: zlib.compress(b)[2:-4]),  # raw deflate stream
])
def test_compressed_bodies_are_accepted(gw, encoding, compress):
    body = {"session_id": "zip", "tool_pairs": [pair("c1", "x" * 50)]}
    status, payload = post(gw, INGEST, None, raw=compress(json.dumps(body).encode()),
                           headers={**AUTH, "Content-Encoding": encoding})
    assert status == 200 and payload["code"] == 0
    assert gw.ingested_pairs("zip") == body["tool_pairs"] and gw.requests[-1].body == body


def test_unknown_encoding_is_legacy_415(gw):
    status, body = post(gw, INGEST, None, raw=b"xx", headers={**AUTH, "Content-Encoding": "br"})
    assert status == 415
    assert body["error"] == "Unsupported Content-Encoding: br" and body["code"] == 415
    assert set(body) == {"error", "code", "message", "trace_id", "retryable"} and body["retryable"] is False


def test_invalid_json_is_legacy_400(gw):
    status, body = post(gw, COMPACT, None, raw=b"{not json")
    assert status == 400
    assert {k: body[k] for k in ("error", "code", "message", "retryable")} == {
        "error": "Invalid JSON body", "code": 400, "message": "Invalid JSON body", "retryable": False}
    assert re.match(r"^[0-9a-f-]{36}$", body["trace_id"]) and "request_id" not in body


def _assert_reset(fn):
    with pytest.raises(ConnectionResetError) as ei:
        fn()
    # A real RST, not a polite close (RemoteDisconnected subclasses ConnectionResetError).
    assert not isinstance(ei.value, http.client.RemoteDisconnected)


def test_body_over_limit_resets_the_connection():
    with FakeGateway(body_limit=2000) as g:
        big = {"session_id": "s", "tool_pairs": [pair("c1", "x" * 3000)]}
        _assert_reset(lambda: post(g, INGEST, big))
        assert g.requests[-1].status is None and g.ingested_pairs("s") == []
        # The limit is on the decompressed JSON: a small gzip body can still be too big.
        raw = gzip.compress(json.dumps(big).encode())
        assert len(raw) < 2000
        _assert_reset(lambda: post(g, INGEST, None, raw=raw, headers={**AUTH, "Content-Encoding": "gzip"}))
        # Just under the limit is fine.
        ok = {"session_id": "s", "tool_pairs": [pair("c2", "x" * 1500)]}
        assert post(g, INGEST, ok)[0] == 200


def test_keep_alive_reuses_one_connection(gw):
    conn = http.client.HTTPConnection("127.0.0.1", gw.port, timeout=5)
    try:
        socks = []
        for i in range(3):
            conn.request("POST", QUERY, body=json.dumps({"session_id": f"s{i}"}),
                         headers={**AUTH, "Content-Type": "application/json"})
            r = conn.getresponse()
            assert r.status == 200 and r.getheader("Content-Length") is not None
            json.loads(r.read())
            socks.append(conn.sock)
        assert socks[0] is not None and socks[0] is socks[1] is socks[2]
    finally:
        conn.close()


# ─── validation ──────────────────────────────────────────────────────────────

_DROP = object()  # marks a key to leave out of a test body


def _p(**kw):
    base = pair("c1", "result text")
    base.update(kw)
    return {k: v for k, v in base.items() if v is not _DROP}


@pytest.mark.parametrize("body, bad_path", [
    ({"session_id": "s", "tool_pairs": [_p(timestamp=_DROP)]}, ["tool_pairs", 0, "timestamp"]),
    ({"session_id": "s", "tool_pairs": [_p(result=_DROP)]}, ["tool_pairs", 0, "result"]),
    ({"session_id": "s", "tool_pairs": [_p(params=_DROP)]}, ["tool_pairs", 0, "params"]),
    ({"session_id": "s", "tool_pairs": [_p(tool_name=3)]}, ["tool_pairs", 0, "tool_name"]),
    ({"session_id": "s", "tool_pairs": [_p(tool_call_id=None)]}, ["tool_pairs", 0, "tool_call_id"]),
    ({"session_id": "s", "tool_pairs": [_p(error=5)]}, ["tool_pairs", 0, "error"]),
    ({"session_id": "s", "tool_pairs": [_p(duration_ms="12")]}, ["tool_pairs", 0, "duration_ms"]),
    ({"session_id": "s", "tool_pairs": {"a": 1}}, ["tool_pairs"]),
    ({"session_id": "a/b", "prompt": "hi"}, ["session_id"]),
    ({"session_id": "a b", "prompt": "hi"}, ["session_id"]),
    ({"session_id": "", "prompt": "hi"}, ["session_id"]),
    ({"session_id": "x" * 501, "prompt": "hi"}, ["session_id"]),
    ({"prompt": "hi"}, ["session_id"]),
    ({"session_id": "s", "prompt": "   "}, ["prompt"]),
    ({"session_id": "s", "prompt": "hi", "recent_messages": [{"role": "system", "content": "x"}]},
     ["recent_messages", 0, "role"]),
    ({"session_id": "s", "prompt": "hi", "recent_messages": [{"role": "user", "content": 1}]},
     ["recent_messages", 0, "content"]),
    ({"session_id": "s", "recent_messages": [{"role": "user", "content": "hi"}]}, []),
    ({"session_id": "s", "tool_pairs": []}, []),
    ([], []),
])
def test_ingest_rejects_invalid_bodies(gw, body, bad_path):
    status, payload = post(gw, INGEST, body)
    assert status == 400 and payload["code"] == 400 and REQ_ID.match(payload["request_id"])
    issues = json.loads(payload["message"])  # zod: a JSON-serialised issues array
    assert isinstance(issues, list) and issues
    assert bad_path in [i["path"] for i in issues]
    assert gw.ingested_pairs("s") == []


def test_ingest_custom_issue_text(gw):
    payload = post(gw, INGEST, {"session_id": "s", "tool_pairs": []})[1]
    assert json.loads(payload["message"]) == [{"code": "custom", "path": [],
                                                "message": "Either tool_pairs must be non-empty or prompt must be provided"}]


@pytest.mark.parametrize("body", [
    {"session_id": "s", "tool_pairs": [_p(result=None)]},
    {"session_id": "s", "tool_pairs": [_p(params=None, error="boom", duration_ms=1.5)]},
    {"session_id": "s", "tool_pairs": [_p(result={"rows": [1, 2]})]},
    {"session_id": "x" * 500, "prompt": "hi"},
    {"session_id": "hermes:sess.1-a_b", "prompt": "  hi  ", "recent_messages": [
        {"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]},
    {"session_id": "s", "tool_pairs": [_p()], "extra_field": True},
])
def test_ingest_accepts_valid_bodies(gw, body):
    status, payload = post(gw, INGEST, body)
    assert (status, payload["data"]) == (200, {})


def _cbody(**kw):
    body = {"session_id": "s", "messages": [{"role": "user", "content": "hi"}], "ratio": 0.5,
            "context_window": 1000, "total_tokens": 10}
    body.update(kw)
    return {k: v for k, v in body.items() if v is not _DROP}


@pytest.mark.parametrize("body, bad_path", [
    (_cbody(ratio=2.5), ["ratio"]), (_cbody(ratio=-0.1), ["ratio"]), (_cbody(ratio="0.5"), ["ratio"]),
    (_cbody(ratio=_DROP), ["ratio"]),
    (_cbody(total_tokens=1.5), ["total_tokens"]), (_cbody(total_tokens=-1), ["total_tokens"]),
    (_cbody(context_window=0), ["context_window"]), (_cbody(context_window=10.5), ["context_window"]),
    (_cbody(context_window=_DROP), ["context_window"]), (_cbody(context_window=True), ["context_window"]),
    (_cbody(messages=[{"content": "x"}]), ["messages", 0]), (_cbody(messages=[{"role": ""}]), ["messages", 0]),
    (_cbody(messages="x"), ["messages"]), (_cbody(message_tokens=["a"]), ["message_tokens", 0]),
    (_cbody(session_id="a/b"), ["session_id"]),
])
def test_compact_rejects_invalid_bodies(gw, body, bad_path):
    status, payload = post(gw, COMPACT, body)
    assert status == 400 and payload["code"] == 400
    assert bad_path in [i["path"] for i in json.loads(payload["message"])]
    assert gw.compact_calls() == []


@pytest.mark.parametrize("body", [
    _cbody(total_tokens=100.0, context_window=1000.0),  # integral floats are ints to zod
    _cbody(ratio=2), _cbody(ratio=0), _cbody(message_tokens=[3.5]), _cbody(messages=[]),
    _cbody(messages=[{"role": "user", "content": "hi", "custom": {"x": 1}}]),
])
def test_compact_accepts_valid_bodies(gw, body):
    assert post(gw, COMPACT, body)[0] == 200


@pytest.mark.parametrize("body", [{}, {"session_id": ""}, {"session_id": "a/b"}, {"session_id": "s", "limit": 0},
                                  {"session_id": "s", "limit": "1"}, {"session_id": "s", "limit": 1.5}, []])
def test_query_mmd_validation_message(gw, body):
    status, payload = post(gw, QUERY, body)
    assert (status, payload["code"], payload["message"]) == (400, 400, "missing or invalid session_id in body")


# ─── ingest pipeline: L1, L1.5, L2, storage ──────────────────────────────────

@pytest.mark.parametrize("sid", ["memory-abc-session-12", "agent:main:subagent-7"])
def test_ignored_sessions_store_nothing(gw, sid):
    for body in ({"session_id": sid, "tool_pairs": [pair("c1", "x" * 300)]},
                 {"session_id": sid, "tool_pairs": [], "prompt": "Do it"}):
        status, payload = post(gw, INGEST, body)
        assert (status, payload["code"], payload["message"], payload["data"]) == (200, 0, "ok", {})
        assert gw.requests[-1].body == body  # received and recorded, just not stored
    assert gw.ingested_pairs(sid) == [] and gw.prompts(sid) == [] and gw.entries(sid) == []
    assert not gw.session_dir(sid).exists()
    assert post(gw, QUERY, {"session_id": sid})[1]["data"] == {"mmds": [], "currentMmd": None}


def test_l1_entries_refs_and_recorded_pairs(gw):
    sid = "hermes:sess-001"
    ingest_prompt(gw, sid, "Refactor the API module")
    long_result = "def handler():\n    return   42\n" * 20  # ≥ 200 chars
    p1 = pair("call_1", long_result, params={"path": "/srv/app/" + "d" * 100 + ".py"})
    p2 = pair("call_2", "ok", duration_ms=12)
    p3 = pair("call_3", {"rows": list(range(10))}, tool="sql")
    p4 = pair("call_4", None, error="permission denied while reading file")
    ingest_pairs(gw, sid, p1, p2)
    ingest_pairs(gw, sid, p3, p4, dict(p1))  # call_1 again: accepted, not summarised twice
    assert gw.ingested_pairs(sid) == [p1, p2, p3, p4, p1]

    entries = {e["tool_call_id"]: e for e in gw.entries(sid)}
    assert list(entries) == ["call_1", "call_2", "call_3", "call_4"]
    e1 = entries["call_1"]
    assert set(e1) == {"tool_call_id", "tool_call", "summary", "timestamp", "score", "node_id", "result_ref"}
    assert e1["tool_call"] == "read_file: " + json.dumps(p1["params"], separators=(",", ":"))[:80]
    assert e1["summary"] == "read_file result: " + " ".join(long_result.split())[:120]
    assert (e1["score"], e1["timestamp"]) == (8, p1["timestamp"])
    assert e1["result_ref"] == "offload/hermes_sess-001/refs/call_1.md"
    ref = gw.data_dir / e1["result_ref"]
    assert ref.read_text(encoding="utf-8") == (
        f"# Tool Result: read_file\n\n**tool_call_id:** call_1\n**Timestamp:** {p1['timestamp']}\n\n---\n\n{long_result}")
    assert (entries["call_2"]["score"], entries["call_2"]["result_ref"]) == (3, None)  # < 20 chars: no ref
    assert not (gw.session_dir(sid) / "refs" / "call_2.md").exists()
    assert entries["call_3"]["summary"] == 'sql result: {"rows":[0,1,2,3,4,5,6,7,8,9]}'
    assert entries["call_4"]["summary"] == "read_file result: permission denied while reading file"
    lines = (gw.session_dir(sid) / "entries.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(x)["tool_call_id"] for x in lines] == ["call_1", "call_2", "call_3", "call_4"]
    assert all(json.loads(x)["node_id"] is None for x in lines)  # node ids live in node-mapping.jsonl


def test_l15_creates_canvases_and_boundaries(gw):
    sid = "s-l15"
    ingest_prompt(gw, sid, "  Refactor the API module!  ")
    state = json.loads((gw.session_dir(sid) / "state.json").read_text())
    assert state["activeMmdFile"] == "001-refactor-the-api-module.mmd"
    assert len(state["boundaries"]) == 1 and ISO_MS.match(state["boundaries"][0]["timestamp"])
    assert state["boundaries"][0]["targetMmd"] == "001-refactor-the-api-module.mmd"
    assert (gw.session_dir(sid) / "mmds" / "001-refactor-the-api-module.mmd").read_text() == ""

    ingest_prompt(gw, sid, "and keep the tests green")  # same task: boundary only
    ingest_prompt(gw, sid, "NEW TASK: Write the release docs")
    ingest_prompt(gw, sid, "[Inter-session message] ping")
    ingest_prompt(gw, sid, "Pre-compaction memory flush")
    state = json.loads((gw.session_dir(sid) / "state.json").read_text())
    assert [b["targetMmd"] for b in state["boundaries"]] == [
        "001-refactor-the-api-module.mmd", "001-refactor-the-api-module.mmd", "002-write-the-release-docs.mmd"]
    assert state["activeMmdFile"] == "002-write-the-release-docs.mmd"
    stamps = [b["timestamp"] for b in state["boundaries"]]
    assert stamps == sorted(stamps)
    assert gw.prompts(sid) == ["  Refactor the API module!  ", "and keep the tests green",
                               "NEW TASK: Write the release docs", "[Inter-session message] ping",
                               "Pre-compaction memory flush"]
    # Tool-pair ingests carrying a prompt never trigger L1.5.
    post(gw, INGEST, {"session_id": sid, "tool_pairs": [pair("c1", "x" * 30)], "prompt": "NEW TASK: other"})
    assert sorted(p.name for p in (gw.session_dir(sid) / "mmds").iterdir()) == [
        "001-refactor-the-api-module.mmd", "002-write-the-release-docs.mmd"]
    assert len(gw.prompts(sid)) == 5
    ctx = (gw.session_dir(sid) / "recent-context.txt").read_text(encoding="utf-8")
    assert ctx == "\n最新user message：\n[User]: NEW TASK: other"


def test_l2_follows_the_string_boundary_rule(gw):
    sid = "s-l2"
    ingest_pairs(gw, sid, pair("early", "x" * 300, ts=now_ts()))  # before any boundary
    time.sleep(0.003)
    ingest_prompt(gw, sid, "Refactor the API module")
    ingest_pairs(gw, sid, pair("a1", "first result " * 20))
    mid = now_ts()
    time.sleep(0.003)
    ingest_prompt(gw, sid, "NEW TASK: Write docs")
    ingest_pairs(gw, sid, pair("late_but_stamped_mid", "second result " * 20, ts=mid), pair("b1", "docs " * 10))
    ingest_pairs(gw, sid, pair("old_format", "z" * 30, ts="2000-01-01T00:00:00.000Z"))

    nodes = {e["tool_call_id"]: e["node_id"] for e in gw.entries(sid)}
    assert nodes == {"early": None, "a1": "001-N1", "late_but_stamped_mid": "001-N2", "b1": "002-N1",
                     "old_format": None}
    mapping = [json.loads(x) for x in (gw.session_dir(sid) / "node-mapping.jsonl").read_text().splitlines()]
    assert mapping == [{"tool_call_id": "a1", "node_id": "001-N1"},
                       {"tool_call_id": "late_but_stamped_mid", "node_id": "001-N2"},
                       {"tool_call_id": "b1", "node_id": "002-N1"}]
    content = (gw.session_dir(sid) / "mmds" / "001-refactor-the-api-module.mmd").read_text(encoding="utf-8")
    lines = content.splitlines()
    assert lines[0] == '%%{ "taskGoal": "Refactor the API module", "progress": "2 steps" }%%'
    assert lines[1] == "flowchart TD"
    assert lines[2].startswith('  001-N1["read_file: ') and "<br/>status: done<br/>summary: read_file result: first" in lines[2]
    assert lines[3].startswith('  001-N2["') and lines[4] == "  001-N1 --> 001-N2" and content.endswith("\n")
    docs = (gw.session_dir(sid) / "mmds" / "002-write-docs.mmd").read_text(encoding="utf-8")
    assert docs.startswith('%%{ "taskGoal": "Write docs", "progress": "1 steps" }%%\nflowchart TD\n  002-N1["')


def test_query_mmd_versions_limit_and_unknown_session(gw):
    sid = "s-q"
    ingest_prompt(gw, sid, "Task one")
    ingest_pairs(gw, sid, pair("c1", "x" * 300))
    ingest_prompt(gw, sid, "NEW TASK: Task two")  # empty canvas
    ingest_prompt(gw, sid, "NEW TASK: Task three")
    data = post(gw, QUERY, {"session_id": sid})[1]["data"]
    assert data["currentMmd"] == "003-task-three.mmd"
    assert [m["filename"] for m in data["mmds"]] == ["001-task-one.mmd", "002-task-two.mmd", "003-task-three.mmd"]
    first = data["mmds"][0]
    assert first["version"] == hashlib.md5(first["content"].encode()).hexdigest()[:12] and "001-N1" in first["content"]
    assert data["mmds"][1] == {"filename": "002-task-two.mmd", "content": "", "version": ""}
    limited = post(gw, QUERY, {"session_id": sid, "limit": 2})[1]["data"]
    assert [m["filename"] for m in limited["mmds"]] == ["001-task-one.mmd", "002-task-two.mmd"]
    only = post(gw, QUERY, {"session_id": sid, "limit": 1})[1]["data"]
    assert [m["filename"] for m in only["mmds"]] == ["003-task-three.mmd"]
    assert post(gw, QUERY, {"session_id": "never-seen"})[1]["data"] == {"mmds": [], "currentMmd": None}


def test_set_canvas_forces_the_active_canvas(gw):
    sid = "s-canvas"
    content = '%%{ "taskGoal": "Ship it" }%%\nflowchart TD\n  001-N1["build"]\n'
    gw.set_canvas(sid, content)
    assert (gw.session_dir(sid) / "mmds" / "001-task.mmd").read_text() == content
    data = post(gw, QUERY, {"session_id": sid, "limit": 1})[1]["data"]
    assert data["currentMmd"] == "001-task.mmd" and data["mmds"][0]["content"] == content
    out = compact(gw, sid, [{"role": "user", "content": "go"}, {"role": "assistant", "content": "ok"},
                            {"role": "user", "content": "next"}], ratio_of_window=0.1)
    active = [m for m in out["messages"] if m.get("_mmdContextMessage") == "active"]
    assert len(active) == 1 and active[0]["_mmdFilename"] == "001-task.mmd"
    assert "**任务目标:** Ship it" in active[0]["content"] and content in active[0]["content"]


def test_storage_dir_is_sanitised_and_ids_collide_like_the_real_one(gw):
    assert gw.session_dir("hermes:sess-001") == gw.data_dir / "offload" / "hermes_sess-001"
    ingest_pairs(gw, "a:b", pair("c1", "x" * 30))
    ingest_pairs(gw, "a_b", pair("c2", "y" * 30))
    assert [p["tool_call_id"] for p in gw.ingested_pairs("a:b")] == ["c1", "c2"]
    assert (gw.data_dir / "offload" / "a_b" / "refs" / "c2.md").exists()


def test_concurrent_ingests_lose_nothing(gw):
    sid = "s-par"
    ingest_prompt(gw, sid, "parallel reads")
    errors = []

    def one(i):
        try:
            ingest_pairs(gw, sid, pair(f"p{i}", f"result {i} " * 30))
        except AssertionError as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(5)
    assert not errors
    entries = gw.entries(sid)
    assert sorted(e["tool_call_id"] for e in entries) == sorted(f"p{i}" for i in range(16))
    assert sorted(e["node_id"] for e in entries) == sorted(f"001-N{k}" for k in range(1, 17))
    assert len(gw.ingested_pairs(sid)) == 16


def test_state_is_reloaded_from_data_dir(tmp_path):
    sid = "s-reload"
    with FakeGateway(data_dir=str(tmp_path)) as g1:
        ingest_prompt(g1, sid, "Persist me")
        ingest_pairs(g1, sid, pair("call_0", "r" * 600))
        msgs = openai_convo(["r" * 600, "short"] + ["pad"] * 4)  # call_0 inside the mild scan window
        assert compact(g1, sid, msgs, ratio_of_window=0.6)["report"]["mildReplacements"] == 1
        before = post(g1, QUERY, {"session_id": sid})[1]["data"]
        assert before["currentMmd"] == "001-persist-me.mmd"
    with FakeGateway(data_dir=str(tmp_path)) as g2:  # a "restarted Gateway" on the same files
        assert [(e["tool_call_id"], e["node_id"]) for e in g2.entries(sid)] == [("call_0", "001-N1")]
        assert post(g2, QUERY, {"session_id": sid})[1]["data"] == before
        replay = compact(g2, sid, openai_convo(["r" * 600, "short"] + ["pad"] * 4), ratio_of_window=0.3)
        assert replay["report"]["fastPathReplaced"] == 1  # compact-state.json was reloaded
        ingest_pairs(g2, sid, pair("call_1", "s" * 600))
        assert g2.entries(sid)[-1]["node_id"] == "001-N2"  # node numbering continues


# ─── compaction ──────────────────────────────────────────────────────────────

def test_token_estimate_heuristic():
    assert estimate_message_tokens({"role": "user", "content": "abcd"}) == 3 + 4  # ceil(9/4)
    assert estimate_message_tokens({"role": "user", "content": "你好"}) == 3 + 4  # ceil(5/4 + 2/1.7)
    tc = {"role": "assistant", "content": None,
          "tool_calls": [{"id": "c", "function": {"name": "read_file", "arguments": '{"p":1}'}}]}
    assert estimate_message_tokens(tc) == -(-len("assistant\n\nread_file\n{\"p\":1}") // 4) + 4
    blocks = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "x" * 40}]}
    assert estimate_message_tokens(blocks) == -(-len("user\n" + "x" * 40) // 4) + 4


def test_level_comes_from_total_tokens_not_the_ratio_field(gw):
    msgs = openai_convo(["x" * 100])
    assert compact(gw, "lv", msgs, ratio_of_window=0.1, ratio_field=1.9)["report"]["resolvedLevel"] == "fastpath"
    assert compact(gw, "lv", msgs, ratio_of_window=0.6, ratio_field=0.0)["report"]["resolvedLevel"] == "mild"
    assert compact(gw, "lv", msgs, ratio_of_window=0.9, ratio_field=0.0)["report"]["resolvedLevel"] == "aggressive"
    assert compact(gw, "lv", msgs, ratio_of_window=0.97, ratio_field=0.0)["report"]["resolvedLevel"] == "emergency"


def test_fastpath_injects_the_active_canvas_once(gw):
    sid = "s-active"
    ingest_prompt(gw, sid, "Refactor the API module")
    ingest_pairs(gw, sid, pair("call_0", "x" * 300))
    canvas = gw.session_dir(sid) / "mmds" / "001-refactor-the-api-module.mmd"
    content = canvas.read_text(encoding="utf-8")
    msgs = openai_convo(["x" * 300])
    out = compact(gw, sid, msgs, ratio_of_window=0.3)
    report = out["report"]
    assert report == {"resolvedLevel": "fastpath", "originalCount": 6, "compactedCount": 7, "fastPathReplaced": 0,
                      "fastPathDeleted": 0, "mildReplacements": 0, "aggressiveDeleted": 0, "emergencyDeleted": 0,
                      "mmdInjected": 1}
    got = out["messages"]
    assert got[:5] == msgs[:5] and got[-1] == msgs[-1]  # inserted just before the final user message
    active = got[5]
    assert active["role"] == "user" and active["_mmdContextMessage"] == "active"
    assert active["_mmdFilename"] == "001-refactor-the-api-module.mmd" and re.match(r"^[0-9a-z]{6}$", active["_mmdVersion"])
    assert active["content"] == (
        "<current_task_context>\n【当前活跃任务的mermaid流程图】这是你最近正在执行的任务的阶段性记录。\n"
        "**任务目标:** Refactor the API module\n**任务文件:** 001-refactor-the-api-module.mmd\n"
        f"```mermaid\n{content}\n```\n"
        '标记为 "doing" 的节点是近期焦点，"done" 的已完成。请参考此保持方向感，避免重复已完成的工作。\n'
        "</current_task_context>")

    again = compact(gw, sid, got, ratio_of_window=0.3)  # same canvas already in place: no-op
    assert again["report"]["mmdInjected"] == 0 and again["messages"] == got

    ingest_pairs(gw, sid, pair("call_1", "y" * 300))  # canvas changes → replaced, not duplicated
    third = compact(gw, sid, got, ratio_of_window=0.3)["messages"]
    actives = [m for m in third if m.get("_mmdContextMessage") == "active"]
    assert len(actives) == 1 and actives[0]["_mmdVersion"] != active["_mmdVersion"] and "001-N2" in actives[0]["content"]

    # Last user message followed by a tool loop: inserted right after that user message.
    loop = msgs[:2] + msgs[2:4]
    out = compact(gw, sid, loop, ratio_of_window=0.3)["messages"]
    assert [m["role"] for m in out] == ["system", "user", "user", "assistant", "tool"]
    assert out[2].get("_mmdContextMessage") == "active"


def test_mmd_version_is_the_js_string_hash(gw):
    gw.set_canvas("h1", "a")
    gw.set_canvas("h2", "hello")  # Java/JS hash of "hello" = 99162322
    to36 = lambda n: "" if n == 0 else to36(n // 36) + "0123456789abcdefghijklmnopqrstuvwxyz"[n % 36]  # noqa: E731
    for sid, expected in (("h1", "00002p"), ("h2", to36(99162322).rjust(6, "0")[:6])):
        out = compact(gw, sid, [{"role": "user", "content": "q"}], ratio_of_window=0.1)["messages"]
        assert [m.get("_mmdVersion") for m in out] == [None, expected]  # ≤ 2 messages: index 1


def test_empty_active_canvas_removes_the_old_injection(gw):
    sid = "s-empty"
    ingest_prompt(gw, sid, "Task one")
    ingest_pairs(gw, sid, pair("call_0", "x" * 300))
    got = compact(gw, sid, openai_convo(["x" * 300]), ratio_of_window=0.3)["messages"]
    assert any(m.get("_mmdContextMessage") for m in got)
    ingest_prompt(gw, sid, "NEW TASK: Task two")  # new, still empty canvas becomes active
    out = compact(gw, sid, got, ratio_of_window=0.3)
    assert out["report"]["mmdInjected"] == 0 and not any(m.get("_mmdContextMessage") for m in out["messages"])
    assert len(out["messages"]) == len(got) - 1


def _mild_session(gw, sid, results):
    ingest_prompt(gw, sid, "Refactor the API module")
    for i, r in enumerate(results):
        ingest_pairs(gw, sid, pair(f"call_{i}", r))


def test_mild_replaces_high_score_results_and_replays(gw):
    sid = "hermes:mild"
    results = ["short result " * 5] + [f"long result {i} " * 50 for i in range(6)]  # scores 3, then 8
    _mild_session(gw, sid, results)
    msgs = openai_convo(results)  # 18 messages → mild scans the first 12
    out = compact(gw, sid, msgs, ratio_of_window=0.6)
    assert out["report"]["resolvedLevel"] == "mild" and out["report"]["mildReplacements"] == 4
    entries = {e["tool_call_id"]: e for e in gw.entries(sid)}
    by_id = {m.get("tool_call_id"): m for m in out["messages"] if m["role"] == "tool"}
    for i in (1, 2, 3, 4):
        e = entries[f"call_{i}"]
        assert by_id[f"call_{i}"]["content"] == (
            f"[Offloaded Tool Result | node: {e['node_id']}]\nSummary: {e['summary']}\n"
            + REF_LINE.format(f"offload/hermes_mild/refs/call_{i}.md"))
        assert by_id[f"call_{i}"]["_offloaded"] is True
    assert by_id["call_0"]["content"] == results[0] and "_offloaded" not in by_id["call_0"]  # score 3
    assert by_id["call_5"]["content"] == results[5]  # outside the first 70 %
    cstate = json.loads((gw.session_dir(sid) / "compact-state.json").read_text())
    assert sorted(cstate["confirmedOffloadIds"]) == ["call_1", "call_2", "call_3", "call_4"]
    assert ISO_MS.match(cstate["lastCompactedAt"]) and cstate["deletedOffloadIds"] == []

    replay = compact(gw, sid, openai_convo(results), ratio_of_window=0.3)  # client resends everything
    assert replay["report"]["resolvedLevel"] == "fastpath" and replay["report"]["fastPathReplaced"] == 4
    assert [m.get("content") for m in replay["messages"] if m["role"] == "tool"] == \
        [m.get("content") for m in out["messages"] if m["role"] == "tool"]


def test_aggressive_is_skipped_when_mild_is_enough(gw):
    sid = "s-skip"
    results = [f"long result {i} " * 50 for i in range(6)]
    _mild_session(gw, sid, results)
    out = compact(gw, sid, openai_convo(results), ratio_of_window=0.9)
    r = out["report"]
    assert (r["resolvedLevel"], r["aggressiveDeleted"]) == ("aggressive", 0) and r["mildReplacements"] > 0
    assert len(out["messages"]) == 16 + 1  # nothing deleted, canvas added


def test_aggressive_deletes_from_head_and_replay_leaves_dangling_tool_calls(gw):
    sid = "s-agg"
    results = [f"{i:02d}" + "x" * 1898 for i in range(18)]  # 1.9 KB each: nothing to truncate
    msgs = openai_convo(results)
    out = compact(gw, sid, msgs, ratio_of_window=0.9)
    r = out["report"]
    assert r["resolvedLevel"] == "aggressive" and r["aggressiveDeleted"] == 6  # 3 tool + 3 assistant
    got = out["messages"]
    assert got[0] == msgs[0] and got[1] == msgs[1]  # system and first user survive (tool results go first)
    assert got[-2:] == msgs[-2:]  # protected tail
    assert [m["tool_call_id"] for m in got if m["role"] == "tool"] == [f"call_{i}" for i in range(3, 18)]
    assert all(m.get("tool_calls", [{}])[0].get("id") not in {"call_0", "call_1", "call_2"} for m in got)
    cstate = json.loads((gw.session_dir(sid) / "compact-state.json").read_text())
    assert sorted(cstate["deletedOffloadIds"]) == ["call_0", "call_1", "call_2"]

    replay = compact(gw, sid, openai_convo(results), ratio_of_window=0.3)
    assert replay["report"]["fastPathDeleted"] == 3 and replay["report"]["resolvedLevel"] == "fastpath"
    answered = {m["tool_call_id"] for m in replay["messages"] if m["role"] == "tool"}
    dangling = [tc["id"] for m in replay["messages"] for tc in m.get("tool_calls") or [] if tc["id"] not in answered]
    assert dangling == ["call_0", "call_1", "call_2"]  # the real Gateway's OpenAI gap


def test_deletion_keeps_system_reminders_and_ten_messages(gw):
    msgs = [{"role": "system", "content": "sys"},
            {"role": "user", "content": "<system-reminder>be nice</system-reminder>"}]
    for i in range(8):  # plain text turns: no tool pairs, so pair integrity adds nothing
        msgs += [{"role": "user", "content": f"question {i} " + "q" * 800},
                 {"role": "assistant", "content": f"answer {i} " + "a" * 800}]
    msgs.append({"role": "user", "content": "final question"})
    out = compact(gw, "s-keep", msgs, ratio_of_window=3.0)  # would need to delete almost everything
    r = out["report"]
    assert r["resolvedLevel"] == "emergency" and (r["aggressiveDeleted"], r["emergencyDeleted"]) == (9, 0)
    assert out["messages"] == msgs[:2] + msgs[-8:]  # system + reminder kept, 10 messages in all


def test_aggressive_truncates_the_largest_results_first(gw):
    results = ["a" * 9000, "b" * 500, "c" * 7000]
    msgs = openai_convo(results)
    out = compact(gw, "s-trunc", msgs, ratio_of_window=0.9)
    r = out["report"]
    assert (r["resolvedLevel"], r["aggressiveDeleted"]) == ("aggressive", 0)
    tools = [m["content"] for m in out["messages"] if m["role"] == "tool"]
    notice = "\n\n[... content truncated, only first 2000 characters retained ...]"
    assert tools[0] == "a" * 2000 + notice and len(tools[0]) == 2066
    assert tools[1] == "b" * 500 and tools[2] == "c" * 7000  # enough was freed by the first cut


def test_history_canvas_is_injected_before_the_active_one(gw):
    sid = "s-hist"
    results = [f"result {i:02d} " + "r" * 30 for i in range(12)]  # 20..199 chars: ref, score 3 (no mild)
    ingest_prompt(gw, sid, "Task one")
    for i in range(4):
        ingest_pairs(gw, sid, pair(f"call_{i}", results[i]))
    time.sleep(0.003)
    ingest_prompt(gw, sid, "NEW TASK: Task two")
    for i in range(4, 12):
        ingest_pairs(gw, sid, pair(f"call_{i}", results[i]))
    msgs = openai_convo(results)
    per_msg = [500] * len(msgs)  # precise client counts: make the short results expensive
    out = compact(gw, sid, msgs, ratio_of_window=0.9, message_tokens=per_msg)
    r = out["report"]
    assert r["aggressiveDeleted"] > 0 and r["mmdInjected"] == 2
    got = out["messages"]
    hist_idx = [i for i, m in enumerate(got) if m.get("_mmdInjection")]
    act_idx = [i for i, m in enumerate(got) if m.get("_mmdContextMessage") == "active"]
    assert len(hist_idx) == 1 and act_idx == [hist_idx[0] + 1] and act_idx[0] == len(got) - 2
    hist = got[hist_idx[0]]
    assert hist["_mmdFilename"] == "001-task-one.mmd" and hist["role"] == "user"
    assert hist["content"].startswith("<history_task_context>\n【历史任务记录】以下是此前完成的任务的概要。\n**任务目标:** Task one\n"
                                      "**任务文件:** 001-task-one.mmd\n```mermaid\n")
    assert hist["content"].endswith("```\n</history_task_context>")
    assert got[act_idx[0]]["_mmdFilename"] == "002-task-two.mmd"


def test_message_tokens_set_the_fixed_overhead(gw):
    sid = "s-overhead"
    results = [f"{i:02d}" + "x" * 1898 for i in range(18)]
    compact(gw, sid, openai_convo(results), ratio_of_window=0.9)  # records 3 deleted ids
    msgs = openai_convo(results)
    est = [estimate_message_tokens(m) for m in msgs]
    total = sum(est)
    base = {"session_id": sid, "messages": msgs, "ratio": 0.5, "context_window": 2 * total, "total_tokens": total}
    # Honest per-message counts: no overhead, post-replay total ≈ 0.42 of the window.
    r1 = post(gw, COMPACT, {**base, "message_tokens": est})[1]["data"]["report"]
    # Tiny counts: almost all of total_tokens is "overhead" that survives the replay.
    r2 = post(gw, COMPACT, {**base, "messages": openai_convo(results), "message_tokens": [1] * len(msgs)})[1]["data"]["report"]
    assert (r1["fastPathDeleted"], r1["resolvedLevel"]) == (3, "fastpath")
    assert (r2["fastPathDeleted"], r2["resolvedLevel"]) == (3, "aggressive")


def test_emergency_puts_canvas_messages_at_index_0(gw):
    msgs = openai_convo([f"{i:02d}" + "x" * 998 for i in range(40)])  # fine-grained: aggressive lands
    hist = {"role": "user", "content": "<history_task_context>old</history_task_context>", "_mmdInjection": True,
            "_mmdFilename": "000-old.mmd"}
    msgs.insert(1, hist)
    out = compact(gw, "s-emerg", msgs, ratio_of_window=1.3)
    r = out["report"]
    assert r["resolvedLevel"] == "emergency" and r["aggressiveDeleted"] > 0 and r["emergencyDeleted"] > 0
    got = out["messages"]
    assert got[0] == hist and got[1]["role"] == "system"  # the real Gateway's bug
    assert got[-1] == msgs[-1] and len([m for m in got if not m.get("_mmdInjection")]) >= 10


def test_anthropic_blocks_mild_aggressive_and_replay(gw):
    sid = "s-anth"
    results = [f"anthropic result {i} " * 40 for i in range(14)]
    _mild_session(gw, sid, results[:4])

    def convo():
        msgs = [{"role": "user", "content": "Refactor the API module"}]
        for i, res in enumerate(results):
            msgs.append({"role": "assistant", "content": [
                {"type": "text", "text": f"Reading {i}"},
                {"type": "tool_use", "id": f"call_{i}", "name": "read_file", "input": {"path": f"/srv/{i}.py"}}]})
            msgs.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"call_{i}", "content": res}]})
        msgs += [{"role": "assistant", "content": [{"type": "text", "text": "Done."}]},
                 {"role": "user", "content": [{"type": "text", "text": "Now write tests"}]}]
        return msgs

    out = compact(gw, sid, convo(), ratio_of_window=0.6)
    assert out["report"]["mildReplacements"] == 4
    replaced = out["messages"][2]
    assert replaced["_offloaded"] is True and replaced["content"][0]["type"] == "tool_result"
    assert replaced["content"][0]["tool_use_id"] == "call_0"
    assert replaced["content"][0]["content"].startswith("[Offloaded Tool Result | node: 001-N1]\nSummary: ")

    out = compact(gw, sid, convo(), ratio_of_window=0.99)
    assert out["report"]["aggressiveDeleted"] + out["report"]["emergencyDeleted"] > 0
    deleted = set(json.loads((gw.session_dir(sid) / "compact-state.json").read_text())["deletedOffloadIds"])
    assert deleted

    def use_ids(msgs):
        return {b["id"] for m in msgs if isinstance(m["content"], list) for b in m["content"] if b.get("type") == "tool_use"}

    def result_ids(msgs):
        return {b["tool_use_id"] for m in msgs if isinstance(m["content"], list)
                for b in m["content"] if b.get("type") == "tool_result"}

    for msgs in (out["messages"], compact(gw, sid, convo(), ratio_of_window=0.3)["messages"]):
        assert use_ids(msgs) == result_ids(msgs)  # block formats stay paired (unlike OpenAI tool_calls)
        assert not (use_ids(msgs) & deleted)


def test_compact_calls_record_request_and_response(gw):
    msgs = openai_convo(["x" * 100])
    data = compact(gw, "s-rec", msgs, ratio_of_window=0.3)
    compact(gw, "other", msgs, ratio_of_window=0.3)
    calls = gw.compact_calls("s-rec")
    assert len(calls) == 1 and len(gw.compact_calls()) == 2
    request, response = calls[0]
    assert request["messages"] == msgs and request["session_id"] == "s-rec"
    assert response == data


# ─── faults ──────────────────────────────────────────────────────────────────

def test_fault_refuse_and_recover_on_the_same_port(gw):
    port = gw.port
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
    conn.request("GET", "/health")
    conn.getresponse().read()
    gw.set_fault("refuse")
    assert gw.port == port
    with pytest.raises(urllib.error.URLError) as ei:
        send(gw, "/health", timeout=2)
    assert isinstance(ei.value.reason, ConnectionRefusedError)
    with pytest.raises((OSError, http.client.HTTPException)):  # a pooled connection dies too
        conn.request("GET", "/health")
        conn.getresponse().read()
    conn.close()
    seen = len(gw.requests)
    gw.clear_fault()
    assert gw.port == port and send(gw, "/health")[0] == 200 and len(gw.requests) == seen + 1


def test_fault_hang_holds_until_client_timeout_then_clear_releases(gw):
    gw.set_fault("hang", hang_seconds=30)
    t0 = time.monotonic()
    with pytest.raises((TimeoutError, urllib.error.URLError)) as ei:
        post(gw, INGEST, {"session_id": "s", "prompt": "hi"}, timeout=0.3)
    # held until the client gave up (its timeout, not the 30 s hang, ended it); a lower bound
    # on a wait never fails on a loaded machine
    assert "timed out" in str(ei.value) and time.monotonic() - t0 >= 0.25
    assert gw.requests[-1].status is None and gw.requests[-1].body == {"session_id": "s", "prompt": "hi"}
    assert gw.prompts("s") == []  # a hung request is not processed

    outcome = {}

    def hung():
        try:
            post(gw, QUERY, {"session_id": "s"}, timeout=5)
            outcome["error"] = None
        except (OSError, http.client.HTTPException) as e:
            outcome["error"] = e

    th = threading.Thread(target=hung)
    n = len(gw.requests)
    th.start()
    assert wait_for(lambda: len(gw.requests) > n, timeout=2.0)
    gw.clear_fault()
    th.join(30)     # the client's own timeout is 5 s: only the release ends it with a ConnectionError
    assert not th.is_alive() and isinstance(outcome["error"], ConnectionError), outcome


def test_fault_hang_ends_after_hang_seconds(gw):
    gw.set_fault("hang", hang_seconds=0.2)
    t0 = time.monotonic()
    with pytest.raises(http.client.RemoteDisconnected):   # the Gateway ended it, not the 5 s timeout
        send(gw, "/health", timeout=5)
    assert time.monotonic() - t0 >= 0.15      # held first; a lower bound never fails on load


def test_stop_releases_hung_requests():
    g = FakeGateway().start()
    g.set_fault("hang", hang_seconds=30)
    outcome = {}

    def hung():
        try:
            send(g, "/health", timeout=5)
        except (OSError, http.client.HTTPException) as e:
            outcome["error"] = e

    th = threading.Thread(target=hung)
    th.start()
    assert wait_for(lambda: len(g.requests) == 1, timeout=2.0)
    g.stop()
    th.join(30)     # the client's own timeout is 5 s: the stop, not it, ended the request
    assert not th.is_alive() and not isinstance(outcome.get("error"), TimeoutError), outcome
    assert "error" in outcome


def test_fault_5xx_envelope_status_and_paths(gw):
    gw.set_fault("5xx", paths=(COMPACT,))
    assert post(gw, INGEST, {"session_id": "s", "prompt": "hi"})[0] == 200
    status, body = post(gw, COMPACT + "/", _cbody())
    assert status == 503 and body["code"] == 503 and body["message"] == "Storage unavailable"
    assert REQ_ID.match(body["request_id"]) and gw.requests[-1].status == 503 and gw.compact_calls() == []
    gw.set_fault("5xx", status=500)
    status, body = post(gw, QUERY, {"session_id": "s"})
    assert (status, body["code"]) == (500, 500)
    assert send(gw, "/health")[0] == 500  # paths=None: /health too


def test_fault_every_nth_and_reset_counters(gw):
    gw.set_fault("5xx", every=3)
    assert [send(gw, "/health")[0] for _ in range(6)] == [200, 200, 503, 200, 200, 503]
    assert [send(gw, "/health")[0] for _ in range(2)] == [200, 200]
    gw.reset_counters()
    assert [send(gw, "/health")[0] for _ in range(3)] == [200, 200, 503]


def test_fault_409(gw):
    gw.set_fault("409", paths=(INGEST,))
    status, body = post(gw, INGEST, {"session_id": "s", "tool_pairs": [pair("c1", "x" * 40)]})
    assert (status, body["code"], body["message"]) == (409, 409, "Concurrent write conflict, please retry")
    assert gw.ingested_pairs("s") == []


def test_fault_reset(gw):
    gw.set_fault("reset")
    _assert_reset(lambda: post(gw, INGEST, {"session_id": "s", "prompt": "hi"}))
    assert gw.requests[-1].status is None and gw.requests[-1].body["prompt"] == "hi"
    gw.clear_fault()
    assert post(gw, INGEST, {"session_id": "s", "prompt": "hi"})[0] == 200


def test_fault_garbage(gw):
    gw.set_fault("garbage")
    status, body, headers = send(gw, COMPACT, _cbody())
    assert (status, body) == (200, b"<html>oops") and headers["Content-Type"].startswith("text/html")


def test_fault_wrong_shape(gw):
    gw.set_fault("wrong_shape")
    status, body = post(gw, COMPACT, _cbody())
    assert status == 200 and body["code"] == 0 and body["data"] == {"messages": "nope"} and REQ_ID.match(body["request_id"])
    assert post(gw, INGEST, {"session_id": "s", "prompt": "hi"}) == (200, {"code": 0, "data": []})
    assert post(gw, QUERY, {"session_id": "s"}) == (200, {"code": 0, "data": []})


def test_set_fault_rejects_unknown_kinds(gw):
    with pytest.raises(ValueError):
        gw.set_fault("explode")
    with pytest.raises(ValueError):
        gw.set_fault("5xx", every=0)


def test_restart_keeps_port_and_state(gw):
    ingest_prompt(gw, "s-restart", "Keep me")
    port = gw.port
    gw.stop()
    with pytest.raises(urllib.error.URLError):
        send(gw, "/health", timeout=1)
    gw.start()
    assert gw.port == port and send(gw, "/health")[0] == 200
    assert post(gw, QUERY, {"session_id": "s-restart"})[1]["data"]["currentMmd"] == "001-keep-me.mmd"


def test_main_serves_until_killed():
    script = REPO_ROOT / "tests" / "fakes" / "gateway"
    proc = subprocess.Popen([sys.executable, str(script), "--port", "0", "--api-key", "k"],
                            stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline().strip()
        m = re.match(r"^listening on (http://127\.0\.0\.1:(\d+))$", line)
        assert m, line
        with urllib.request.urlopen(m.group(1) + "/health", timeout=5) as r:
            assert json.loads(r.read())["status"] == "ok"
    finally:
        proc.terminate()
        proc.wait(5)
