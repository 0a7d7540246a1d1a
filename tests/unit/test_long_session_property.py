"""Long sessions as a property: seeded random conversations of mixed shapes (OpenAI and
Anthropic calls, parallel calls, reused call ids, images, list contents, empty texts, huge and
tiny results, text carrying the plugin's own marks) driven through 20+ compactions as Hermes
0.17, 0.19 and 0.22 drive the engine (``ops.driver``), with and without the fake Gateway and
its faults. After every turn: each request and the transcript valid (every call answered),
each request under the window, every compaction landed under the trigger, the current user
message as sent, the digest within its budget, at most one canvas per request, every key the
plugin shows read back (exactly, when it names a result), and at the end every tool result
that left the context read back exactly.

A failing seed reproduces alone: ``run_session(seed, host, gateway)`` in a shell."""

from __future__ import annotations

import json
import random
import re
from typing import Any, Dict, List, Optional

import pytest

import tencentdb_offload as plugin
from fakes.gateway import FakeGateway
from tencentdb_offload.ops.driver import read_whole as read_key
from tencentdb_offload.context import canvas
from tencentdb_offload.context import digest
from tencentdb_offload.context.messages import newest_real_user, text_of, tool_results
from tencentdb_offload.context import validate
from tencentdb_offload.ops.driver import Driver
from tencentdb_offload.ops.host_emulation import NOT_SELECTING, SELECTING

from helpers import FullDisk, env_for

WINDOW = 64_000
MARKS = ["[CONTEXT SUMMARY]", "tdo_digest_1", "<current_task_context>x</current_task_context>",
         "[tencentdb-offload] note", 'tdai_read_cos(tool_call_id="zz_typed")', "[tdo-seal trim 00]"]
POINTER = re.compile(r'tdai_read_cos\((?:tool_call_id|key)="([^"<\s]+)"')
DIGEST_KEY = re.compile(r"\[((?:call_|msg-)[^\]\s]+)\]|\((msg-[0-9a-f]+)\)")
DIGEST_TOKENS = digest.CEILING              # its budget's ceiling (our estimate, as it is sized)
FAULTS = ["5xx", "garbage", "wrong_shape", "reset", "409", "route_404"]


class Host(Driver):
    """The driver, with the outbox delivered before each compaction while the Gateway is
    well: what the Gateway holds then (and so what it replaces) is the same on every run."""
    gateway_well = False

    def _compress(self, tokens: int, trigger: str) -> None:
        if self.gateway_well:
            self.rt.flush(self.sid, 5)
        super()._compress(tokens, trigger)


class Host017(Host):
    """Hermes 0.17: a compaction ends the session id; the next one continues it."""

    def _compress(self, tokens: int, trigger: str) -> None:
        done = len(self.compactions)
        super()._compress(tokens, trigger)
        if len(self.compactions) > done:
            old, self.sid = self.sid, self.sid + "r"
            self.engine.on_session_start(self.sid, boundary_reason="compression",
                                         old_session_id=old, platform="cli", conversation_id=None)


class Conversation:
    """The random user turns and the steps answering them."""

    def __init__(self, rng: random.Random) -> None:
        self.rng, self.n, self.ids = rng, 0, []       # ids: every call id used (some reused)
        # one kind of bulk text a session: the simulated provider counts every text at 3.6
        # chars a token, our estimate by its class, and calibration fits one slope a session
        # (docs/limits.md); a mix of classes in huge results would test the simulation
        self.bulk = rng.choice(["abc ", "def f(x):\n    return x\n", '{"k": [1, 2]} '])

    def user(self) -> Dict[str, Any]:
        rng = self.rng
        self.n += 1
        text = "%s #%d" % (rng.choice(["fix the bug", "修复这个错误", "write docs " * rng.randint(1, 200),
                                       rng.choice(MARKS) + " please", ""]), self.n)
        shape = rng.random()
        if shape < 0.08:
            return {"role": "user", "content": [{"type": "text", "text": text}, {
                "type": "image_url", "image_url": {"url": "data:image/png;base64," + "QUJD" * 2000}}]}
        if shape < 0.16:
            return {"role": "user", "content": [{"type": "text", "text": "first part"},
                                                {"type": "text", "text": text}]}
        return {"role": "user", "content": text}

    def call_ids(self, count: int) -> List[str]:
        ids: List[str] = []
        for _ in range(count):
            self.n += 1
            reuse = self.ids and self.rng.random() < 0.15
            cid = self.rng.choice(self.ids) if reuse else "call_%d" % self.n
            if cid not in ids:
                ids.append(cid)
        self.ids += ids
        return ids

    def result(self, cid: str) -> str:
        rng = self.rng
        size = rng.choice([0, 8, 300, 3_000, 20_000, 40_000, 60_000, 90_000])
        # (CJK and other classes only small: 0.17/0.19 measure chars / 4, a quarter of what a
        # provider counts for CJK, and send big ones over the window before any compaction)
        unit = self.bulk if size > 3_000 else rng.choice(
            [self.bulk, "中文内容，", "abc ", rng.choice(MARKS) + " "])
        return ("%s #%d: " % (cid, self.n)) + (unit * (size // len(unit) + 1))[:size]

    def steps(self) -> List[Any]:
        rng, out = self.rng, []
        for _ in range(rng.choice([0, 1, 2, 2, 3])):
            ids = self.call_ids(rng.choice([1, 1, 2, 3]))
            texts = [self.result(cid) for cid in ids]
            if rng.random() < 0.5:
                call = {"role": "assistant", "content": rng.choice([None, "", "looking"]),
                        "tool_calls": [{"id": cid, "type": "function", "function": {
                            "name": "read_file", "arguments": json.dumps({"path": "/src/" + cid})}}
                            for cid in ids]}
                results = [{"role": "tool", "tool_call_id": cid, "content": text}
                           for cid, text in zip(ids, texts)]
            else:
                call = {"role": "assistant", "content": [{"type": "text", "text": "reading"}] + [
                    {"type": "tool_use", "id": cid, "name": "read_file", "input": {"path": "/" + cid}}
                    for cid in ids]}
                results = [{"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": cid, "content": text}
                    for cid, text in zip(ids, texts)]}]
            out.append((call, results))
        reply = rng.choice(["done", "完成了", "x" * 3_000, "", rng.choice(MARKS)])
        return out + [({"role": "assistant", "content": reply}, [])]


def read_whole(engine: Any, key: str) -> Optional[str]:
    return read_key(engine, key)[0]


class Checks:
    """The invariants, each failure one line naming the turn. With a ``reader`` (a second
    runtime on the same home: what a restarted process reads), every key shown must read
    back there, from what the archive holds on disk."""

    def __init__(self, driver: Driver, reader: Any = None) -> None:
        self.d, self.problems, self.canvases, self.seen = driver, [], 0, 0
        self.reader = reader
        self.read_back: Dict[str, str] = {}     # key -> the text it was seen to read back
        sent = Driver._as_sent

        def as_sent(request: Dict[str, Any]) -> Dict[str, Any]:
            out = sent(driver, request)
            self.canvases = max(self.canvases, sum(
                text_of(m).count("[tdo-seal canvas") for m in out["messages"]))
            return out
        driver._as_sent = as_sent

    def turn(self, turn: int, user: Dict[str, Any]) -> None:
        d, bad = self.d, self.problems.append
        for r in d.requests:
            if not r["valid"]:
                bad("turn %d: invalid request %s" % (turn, r["errors"]))
            if r["prompt_tokens"] > d.ctx:
                bad("turn %d: request of %d tokens over the window" % (turn, r["prompt_tokens"]))
        d.requests.clear()
        unpaired = validate.validation_errors([d.system] + d.messages)     # what the host keeps
        if unpaired:
            bad("turn %d: the transcript is not a valid request: %s" % (turn, unpaired[:2]))
        for c in d.compactions[self.seen:]:
            if c["tokens_after"] > d.engine.threshold_tokens:
                bad("turn %d: landed at %d over the trigger: %s" % (turn, c["tokens_after"],
                                                                    c["describe"]))
        self.seen = len(d.compactions)
        if self.current(d.messages) != user:
            bad("turn %d: the current user message changed" % turn)
        if self.canvases > 1:
            bad("turn %d: %d canvases in one request" % (turn, self.canvases))
        self.canvases = 0
        self.keys(turn)

    def current(self, messages: List[Any]) -> Any:
        """The current user message, without the canvas 0.17/0.19 get appended to it."""
        at = newest_real_user(messages)
        if at < 0:
            return None
        shown, _n = canvas.strip_from(messages[at], self.d.rt.seal)
        return None if shown is None else {k: v for k, v in shown.items() if k != "api_content"}

    def keys(self, turn: int) -> None:
        d, seal = self.d, self.d.rt.seal
        texts = [t for m in d.messages           # (a tool message's text is its result: once)
                 for t in dict.fromkeys([text_of(m)] + [r for _i, r in tool_results(m)])]
        ours = [t for t in texts if seal.open_text(t) is not None]     # the user's keys are theirs
        digests = [t for t in ours if seal.open_text(t)[0] == "digest"]
        size = sum(map(digest.tokens_of, digests))
        if size > DIGEST_TOKENS:
            self.problems.append("turn %d: digest of %d tokens" % (turn, size))
        said_lost = any("[%s]" % digest.NOT_KEPT in t or "not kept (" in t for t in texts)
        if said_lost and self.reader is None:       # (no disk fault: every text was archived)
            self.problems.append("turn %d: a mark says not kept, the store writable" % turn)
        keys = {k for t in ours for k in POINTER.findall(t)}
        keys |= {a or b for t in digests for a, b in DIGEST_KEY.findall(t)}
        for key in sorted(k for k in keys if not k.endswith("\u2026") and k != "zz_typed"):
            original = d.originals.get(key)
            # the archive only grows here: a key that read its text once reads it again
            if key in self.read_back and (original is None or original[1] == self.read_back[key]):
                continue
            text = read_whole(self.reader or d.engine, key)
            if text is not None:
                self.read_back[key] = text
            if text is None or (original is not None and text != original[1]):
                self.problems.append("turn %d: key %s shown but %s" % (
                    turn, key, "unreadable" if text is None else "reads another text"))

    def departed(self) -> None:
        """Every result that left the context reads back exactly by its id (a reused id: the
        oldest text, the one the driver keeps)."""
        context = "\n".join(text_of(m) for m in self.d.messages)
        for cid, (_name, text, _args) in sorted(self.d.originals.items()):
            if text not in context and read_whole(self.d.engine, cid) != text:
                self.problems.append("end: %s left the context and does not read back" % cid)


def run_session(seed: int, host: str, gateway: Optional[FakeGateway] = None,
                turns: int = 65, tmp=None, window: int = WINDOW,
                settings: Optional[Dict[str, str]] = None, disk: bool = False) -> List[str]:
    """``disk``: the store's disk fills and is freed at random turns (``FullDisk``), and
    every key shown is read as a restarted process would (writes held in memory are not)."""
    import tempfile
    from pathlib import Path
    rng = random.Random(seed)
    home = Path(tmp or tempfile.mkdtemp())
    extra = dict(settings or {}) if gateway is None else dict(
        settings or {}, gateway_url=gateway.url, api_key="k1", instance_id="svc")
    rt = plugin.build_runtime(env=env_for(home, **extra))
    kind = Host017 if host == "0.17" else Host
    d = kind(rt, "s1", window, "You are helpful.", [], host=SELECTING if host == "0.22" else NOT_SELECTING)
    after_restart = plugin.build_runtime(env=env_for(home)) if disk else None
    reader = after_restart and plugin.open_session(after_restart, d.engine.current_state().key,
                                                   window, model="m")
    checks, talk = Checks(d, reader), Conversation(rng)
    fault = full = None
    try:
        for turn in range(turns):
            if gateway is not None and rng.random() < 0.15:
                fault = rng.choice(FAULTS + [None, None])
                gateway.set_fault(fault, every=rng.randint(1, 3)) if fault else gateway.clear_fault()
            if disk and rng.random() < (0.3 if full else 0.1):
                full = full.free() if full else FullDisk(rt, ballast=16 << 20)
            d.gateway_well = gateway is not None and fault is None and not full
            user = talk.user()
            d.run_turn(user, talk.steps())
            checks.turn(turn, user)
        if full:
            full.free()
        checks.departed()
        if len(d.compactions) < 20:
            checks.problems.append("only %d compactions" % len(d.compactions))
    finally:
        rt.close()
        if after_restart is not None:
            after_restart.close()
    return checks.problems


@pytest.mark.parametrize("seed,host,with_gateway", [
    (1, "0.19", False), (2, "0.22", False), (3, "0.17", False),
    (4, "0.19", True), (6, "0.22", True), (9, "0.17", True)])
def test_long_session_keeps_every_invariant(tmp_path, seed, host, with_gateway):
    if not with_gateway:
        assert run_session(seed, host, tmp=tmp_path) == []
        return
    with FakeGateway(api_key="k1") as gw:
        assert run_session(seed, host, gw, tmp=tmp_path) == []


@pytest.mark.parametrize("seed,host,with_gateway", [(11, "0.19", False), (12, "0.22", True)])
def test_long_sessions_on_a_disk_that_fills_show_only_keys_a_restart_reads(tmp_path, seed, host,
                                                                          with_gateway):
    """The store's disk fills and is freed at random turns: every key shown reads back from
    what is on disk (a restarted process's view); what is not there was marked not kept."""
    if not with_gateway:
        assert run_session(seed, host, tmp=tmp_path, disk=True) == []
        return
    with FakeGateway(api_key="k1") as gw:
        assert run_session(seed, host, gw, tmp=tmp_path, disk=True) == []


@pytest.mark.parametrize("seed,host,window,settings", [
    # the Gateway's one reference for both texts of a reused id named neither
    (208223, "0.22", 200_000, {"max_context_tokens": "30000"}),
    # two user turns the Gateway's reply merged left in the local finish under the merged key
    (640270, "0.19", 128_000, {"threshold": "0.3", "compact_ratio": "0.05"})])
def test_long_sessions_under_other_budgets_keep_every_key_readable(tmp_path, seed, host,
                                                                   window, settings):
    """Seeds a sweep of windows and settings found (40 turns: fewer compactions than 20)."""
    with FakeGateway(api_key="k1") as gw:
        problems = run_session(seed, host, gw, turns=40, tmp=tmp_path, window=window,
                               settings=settings)
    assert [p for p in problems if not p.startswith("only ")] == []
