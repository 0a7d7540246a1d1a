"""``demo`` and ``replay``: drive the engine through a session exactly as Hermes does.

Per turn the driver does what Hermes 0.19's agent loop does: the turn-start preflight check,
the ``pre_llm_call`` hook, then per API call the pre-API pressure check, the ``llm_request``
middleware, a simulated provider reply whose ``prompt_tokens`` is a fixed function of the
request size (so the engine's calibration is exercised), ``update_from_response``, one
``post_tool_call`` per tool call and ``should_compress(last_prompt_tokens)`` → ``compress``.
Every request is checked with ``messages.validation_errors``. The report (shared by both
commands) shows every compaction, the context size per turn and a recall of an archived item.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from . import build_runtime
from . import messages as M
from .cli import CliError, resolve_settings
from .engine import TencentDBOffloadEngine
from .gateway_client import GatewayError, GatewayRejected
from .hooks import HookHandlers
from .tools import READ
from .cli_report import render
from .replay_sources import load_source

Message = Dict[str, Any]
Step = Tuple[Message, List[Message]]          # an assistant message and the results answering it
PROVIDER_FRAMING = 600                        # tokens a provider adds around every request
_CJK = re.compile("[\u3000-\u303f\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uff00-\uffef]")


def provider_tokens(request: Dict[str, Any]) -> int:
    """The simulated provider's ``prompt_tokens``: ~3.6 chars per token, one per CJK char,
    4 per message, plus framing. Deliberately not our own estimate, so calibration has work."""
    chars = cjk = 0
    for m in request.get("messages") or ():
        text = M.text_of(m)
        chars += len(text) + 4 * 3.6
        cjk += len(_CJK.findall(text))
    schema = json.dumps(request.get("tools") or [], ensure_ascii=False)
    return int(PROVIDER_FRAMING + (chars - cjk + len(schema)) / 3.6 + cjk * 1.0)


def rough_tokens(request: Dict[str, Any]) -> int:
    """Hermes' rough pre-request estimate: characters / 4."""
    return len(json.dumps(request, ensure_ascii=False, default=str)) // 4


class Driver:
    """One Hermes session (one agent, one session id) over one runtime."""

    def __init__(self, runtime: Any, session_id: str, context_length: int,
                 system_prompt: str, tools: List[Dict[str, Any]]) -> None:
        self.rt = runtime
        self.sid = session_id
        self.ctx = context_length
        self.engine = TencentDBOffloadEngine(runtime)
        self.hooks = HookHandlers(runtime)
        self.engine.update_model(model="tdo-demo", context_length=context_length,
                                 base_url="", api_key="", provider="custom",
                                 api_mode="chat_completions")
        self.engine.on_session_start(session_id, hermes_home="", platform="cli",
                                     model="tdo-demo", context_length=context_length,
                                     conversation_id=None)
        self.system = {"role": "system", "content": system_prompt}
        self.tools = tools + [{"type": "function", "function": s}
                              for s in self.engine.get_tool_schemas()]
        self.messages: List[Message] = []
        self.requests: List[Dict[str, Any]] = []
        self.compactions: List[Dict[str, Any]] = []
        self.turns: List[Dict[str, Any]] = []
        self.originals: Dict[str, Tuple[str, str, Any]] = {}   # tool_call_id -> (tool, text, args)
        self.no_progress = 0
        self.turn_no = 0

    # -- one turn ---------------------------------------------------------------------
    def run_turn(self, user: Optional[Message], steps: List[Step]) -> None:
        self.turn_no += 1
        first_request = len(self.requests)
        first_compaction = len(self.compactions)
        injected = ""
        if user is not None:
            self.messages.append(user)
            req = self._request("")
            rough = rough_tokens(req)
            if (len(self.messages) > self.engine.protect_first_n + self.engine.protect_last_n + 1
                    or rough >= self.engine.threshold_tokens):
                if not self.engine.should_defer_preflight_to_real_usage(rough) and \
                        self.engine.should_compress(rough):
                    self._compress(rough, "preflight")
            out = self.hooks.pre_llm_call(
                session_id=self.sid, task_id="", turn_id=str(self.turn_no),
                user_message=M.text_of(user), conversation_history=list(self.messages),
                is_first_turn=self.turn_no == 1, model="tdo-demo", platform="cli", sender_id="")
            if isinstance(out, dict) and out.get("context"):
                injected = str(out["context"])
        for assistant, results in steps:
            self._api_call(assistant, injected)
            if not results:
                continue
            args_by_id = M.call_args(assistant)
            for r in results:
                self.messages.append(r)
                for tid, text in M.tool_results(r):
                    name, raw_args = args_by_id.get(tid, (str(r.get("tool_name") or ""), "{}"))
                    args = _json_or_text(raw_args)
                    self.originals.setdefault(tid, (name, text, args))
                    self.hooks.post_tool_call(
                        tool_name=name, args=args, result=text,
                        session_id=self.sid, tool_call_id=tid, task_id="", turn_id=str(self.turn_no),
                        duration_ms=12, status="ok", error_message=None)
            last = self.engine.last_prompt_tokens
            tokens = last if last > 0 else (0 if last == -1 else rough_tokens(self._request("")))
            if self.engine.should_compress(tokens):
                self._compress(tokens, "after tools")
        reqs = self.requests[first_request:]
        comps = self.compactions[first_compaction:]
        self.turns.append({
            "turn": self.turn_no, "messages": len(self.messages), "requests": len(reqs),
            "peak_tokens": max((r["prompt_tokens"] for r in reqs), default=0),
            "tokens_before": comps[0]["tokens_before"] if comps else None,
            "tokens_after": comps[-1]["tokens_after"] if comps else None,
            "action": ("compact" if len(comps) == 1 else "compact x%d" % len(comps)) if comps else "-",
            "level": "+".join(c["level"] or "-" for c in comps),
            "path": "+".join(c["path"] for c in comps)})

    def _request(self, injected: str) -> Dict[str, Any]:
        msgs = list(self.messages)
        if injected:          # like Hermes: appended to the current user message, this turn only
            idx = max((i for i, m in enumerate(msgs) if M.is_real_user(m)), default=-1)
            if idx >= 0:
                content = msgs[idx].get("content")
                text = content if isinstance(content, str) else M.text_of(msgs[idx])
                msgs[idx] = M.with_content(msgs[idx], text + "\n\n" + injected)
        return {"model": "tdo-demo", "messages": [self.system] + msgs, "tools": self.tools}

    def _api_call(self, assistant: Message, injected: str) -> None:
        request = self._request(injected)
        rough = rough_tokens(request)
        if self.engine.should_compress(rough):                 # 0.19 pre-API pressure check
            self._compress(rough, "pre-API")
            request = self._request(injected)
        if self.rt.settings.canvas:        # register() adds the middleware only then
            out = self.hooks.llm_request(request=request, session_id=self.sid)
            if isinstance(out, dict) and isinstance(out.get("request"), dict):
                request = out["request"]
        prompt = provider_tokens(request)
        errors = M.validation_errors(request["messages"])
        self.requests.append({"turn": self.turn_no, "messages": len(request["messages"]),
                              "prompt_tokens": prompt, "valid": not errors, "errors": errors[:3]})
        self.messages.append(assistant)
        completion = max(1, len(M.text_of(assistant)) // 4)
        self.engine.update_from_response({
            "prompt_tokens": prompt, "completion_tokens": completion,
            "total_tokens": prompt + completion, "input_tokens": prompt,
            "output_tokens": completion, "cache_read_tokens": 0, "cache_write_tokens": 0,
            "reasoning_tokens": 0})

    def _compress(self, tokens: int, trigger: str) -> None:
        before = len(self.messages)
        result = self.engine.compress(self.messages, current_tokens=tokens, focus_topic=None,
                                      force=False)
        if not isinstance(result, list) or not result or result == self.messages:
            self.no_progress += 1
            return
        self.messages = list(result)
        # what Hermes does after a compaction
        self.engine.last_prompt_tokens = -1
        self.engine.last_completion_tokens = 0
        self.engine.on_session_start(self.sid, boundary_reason="compression",
                                     old_session_id=self.sid, platform="cli", conversation_id=None)
        event: Dict[str, Any] = {}
        if self.rt.store is not None:
            self.rt.flush_writes()
            key = self.rt.registry.conversation_of(self.sid)
            found = [e for e in self.rt.store.events("compaction", limit=10) if e.get("session") == key]
            event = found[0] if found else {}
        self.compactions.append({
            "turn": self.turn_no, "trigger": trigger, "messages_before": before,
            "messages_after": len(self.messages), "tokens_before": event.get("tokens_before", tokens),
            "tokens_after": event.get("tokens_after", 0), "level": event.get("level", ""),
            "path": event.get("path", "?"), "archived": event.get("archived", 0),
            "error": event.get("error", "")})

    # -- the end: recall one archived item ---------------------------------------------
    def recall(self) -> Dict[str, Any]:
        context = "\n".join(M.text_of(m) for m in self.messages)
        pick = None
        for tid, (name, text, args) in self.originals.items():
            if M.is_heartbeat_call(name, args):
                continue
            if text and text not in context:
                pick = tid
                break
        if pick is None and self.originals:
            pick = next(iter(self.originals))
        if pick is None:
            return {"ok": False, "reason": "no tool result in this session"}
        name, original, _args = self.originals[pick]
        got, offset, pages = [], 0, 0
        while offset is not None and pages < 200:
            reply = json.loads(self.engine.handle_tool_call(
                READ, {"tool_call_id": pick, "offset": offset, "limit": 100_000}, messages=[]))
            if not reply.get("ok"):
                return {"ok": False, "tool_call_id": pick, "tool_name": name,
                        "reason": reply.get("error", "?")}
            got.append(reply["content"])
            offset, pages = reply.get("next_offset"), pages + 1
        text = "".join(got)
        return {"ok": text == original, "tool_call_id": pick, "tool_name": name,
                "chars": len(text), "original_chars": len(original),
                "left_context": original not in context, "identical": text == original,
                "preview": text[:120]}


def _json_or_text(raw: Any) -> Any:
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except ValueError:
            return raw
    return raw


# --- the synthetic session ------------------------------------------------------------

SYSTEM_PROMPT = (
    "You are a coding agent working in the repository of a payments company. You can read and "
    "write files, run commands in a terminal and search the code. Work step by step, verify "
    "every change by running the tests, and keep the user informed. Prefer small, reviewable "
    "changes. 你可以用中文或英文回答，取决于用户使用的语言。\n") * 6

TOOLS = [{"type": "function", "function": {
    "name": n, "description": d,
    "parameters": {"type": "object", "properties": {k: {"type": "string"} for k in ks},
                   "required": list(ks[:1])}}} for n, d, ks in (
    ("read_file", "Read a text file, paged by lines.", ("path", "offset", "limit")),
    ("write_file", "Write a whole file.", ("path", "content")),
    ("terminal", "Run a shell command and return its output.", ("command", "timeout")),
    ("search_files", "Search file contents with a regular expression.", ("pattern", "path")),
    ("patch", "Apply a unified diff to files.", ("diff",)))]

PROMPTS = [
    "Port the billing client's retry logic to asyncio. Start by reading the current module.",
    "Now look at how the tests exercise the retry policy and run them.",
    "请阅读设计文档，确认重试策略和告警规则的要求。",
    "Search for every caller of RetryPolicy and list what must change.",
    "Write the async version of the backoff helper and run the unit tests again.",
    "测试失败了，请查看失败的用例并修复。",
    "Check the settlement module too; it has its own copy of the retry loop.",
    "Update the docs to describe the new async retry behaviour, in both languages.",
    "Run the whole test suite and the linter, then summarise what is still failing.",
    "请检查日志格式，确保每次重试都记录了请求编号和等待时间。",
    "Refactor the duplicated jitter code into one function and add tests for it.",
    "Look at the integration tests against the sandbox gateway and run them.",
]

_CN = ("重试策略说明：当上游支付网关返回 503 或连接超时，客户端按指数退避重试，最多 {a} 次。"
       "每次重试前记录日志（请求编号、等待时间、错误码），第 {b} 次失败后触发告警并写入对账队列。"
       "结算模块必须保证幂等：同一请求编号只扣款一次。\n")


def _code(rng: random.Random, tag: str, size: int) -> str:
    out, i = ["# %s\nimport asyncio\nimport logging\n\nlog = logging.getLogger(__name__)\n\n" % tag], 0
    while sum(map(len, out)) < size:
        k, cap = rng.randint(2, 9), rng.choice([5, 10, 30, 60])
        out.append("def retry_delay_%d(attempt: int, base: float = 0.5) -> float:\n"
                   "    \"\"\"Backoff for attempt %d of the %s client.\"\"\"\n"
                   "    delay = base * (2 ** min(attempt, %d))\n"
                   "    return min(delay, %d.0)  # cap\n\n" % (i, i, tag.split("/")[-1], k, cap))
        i += 1
    return "".join(out)[:size]


def _pytest(rng: random.Random, tag: str, size: int) -> str:
    out, i = ["$ pytest -q %s\n" % tag], 0
    while sum(map(len, out)) < size:
        ok = rng.random() > 0.08
        out.append("tests/test_%s.py::test_case_%03d %s [%3d%%]\n"
                   % (tag.split("/")[-1].split(".")[0], i, "PASSED" if ok else "FAILED", i % 100))
        if not ok:
            out.append("    AssertionError: expected delay %.2f, got %.2f\n"
                       % (rng.random() * 8, rng.random() * 8))
        i += 1
    return "".join(out)[:size]


def _grep(rng: random.Random, tag: str, size: int) -> str:
    out = ["search results for %s\n" % tag]
    while sum(map(len, out)) < size:
        out.append("src/billing/%s.py:%d:    policy = RetryPolicy(max_attempts=%d, jitter=%s)\n"
                   % (rng.choice(["client", "settlement", "refunds", "ledger", "webhooks"]),
                      rng.randint(1, 900), rng.randint(2, 9), rng.choice(["True", "False"])))
    return "".join(out)[:size]


def _doc(rng: random.Random, tag: str, size: int) -> str:
    out = ["# %s 设计文档\n" % tag]
    while sum(map(len, out)) < size:
        out.append(_CN.format(a=rng.randint(3, 9), b=rng.randint(2, 5)))
    return "".join(out)[:size]


_KINDS = (("read_file", "path", "src/billing/retry_%d_%d.py", _code),
          ("terminal", "command", "tests/billing/test_retry_%d_%d.py", _pytest),
          ("search_files", "pattern", "RetryPolicy.*attempt_%d_%d", _grep),
          ("read_file", "path", "docs/设计_%d_%d.md", _doc))


def synthetic_session(turns: int, seed: int) -> List[Tuple[Message, List[Step]]]:
    """A deterministic long coding session: (user message, steps) per turn."""
    rng = random.Random(seed)
    heartbeat_at = max(1, turns // 3)
    out: List[Tuple[Message, List[Step]]] = []
    for t in range(turns):
        if t == heartbeat_at and turns > 2:
            cid = "call_hb_%d" % t
            steps: List[Step] = [
                ({"role": "assistant", "content": "", "tool_calls": [_call(cid, "read_file", {"path": "HEARTBEAT.md"})]},
                 [{"role": "tool", "tool_call_id": cid, "content": "# HEARTBEAT\n- nothing is due\n"}]),
                ({"role": "assistant", "content": "HEARTBEAT_OK"}, [])]
            out.append(({"role": "user", "content": "[heartbeat] Read HEARTBEAT.md and follow it; "
                         "reply HEARTBEAT_OK if nothing needs attention."}, steps))
            continue
        steps = []
        for s in range(rng.choice([1, 2, 2, 3])):
            calls, results = [], []
            for k in range(rng.choice([1, 2, 2, 3])):
                name, arg, pattern, make = rng.choice(_KINDS)
                cid = "call_%d_%d_%d" % (t, s, k)
                target = pattern % (t, s * 10 + k)
                size = rng.choice([1500, 3000, 4500, 6000, 9000, 12000, 14000])
                calls.append(_call(cid, name, {arg: target}))
                results.append({"role": "tool", "tool_call_id": cid, "content": make(rng, target, size)})
            lead = rng.choice(["", "Let me check that.", "我先看一下相关代码。", "Running the tests now."])
            steps.append(({"role": "assistant", "content": lead, "tool_calls": calls}, results))
        summary = rng.choice([
            "Done: the retry loop now awaits asyncio.sleep with capped exponential backoff; "
            "two tests still fail in the settlement module, next I will fix the jitter seed. ",
            "完成了：重试逻辑已改为异步实现，日志中包含请求编号和等待时间。还有一个集成测试失败，"
            "原因是沙箱网关返回了 429，需要在下一步处理。"]) * rng.randint(1, 3)
        steps.append(({"role": "assistant", "content": summary}, []))
        prompt = PROMPTS[t % len(PROMPTS)] + " (turn %d)" % (t + 1)
        out.append(({"role": "user", "content": prompt}, steps))
    return out


def _call(cid: str, name: str, args: Dict[str, Any]) -> Dict[str, Any]:
    return {"id": cid, "type": "function",
            "function": {"name": name, "arguments": json.dumps(args, ensure_ascii=False)}}


def split_turns(messages: List[Message]) -> Tuple[List[Tuple[Optional[Message], List[Step]]], str]:
    """Turns of a real conversation (split at real user messages) and its system prompt."""
    system, turns = "", []
    user: Optional[Message] = None
    steps: List[Step] = []
    started = False
    for m in messages:
        r = M.role(m)
        if r == "system":
            system = system or M.text_of(m)
            continue
        if M.is_real_user(m):
            if started:
                turns.append((user, steps))
            user, steps, started = m, [], True
            continue
        started = True
        if r == "assistant" or not steps:
            steps.append((m, []))          # an API call whose reply is this message
        else:
            steps[-1][1].append(m)
    if started:
        turns.append((user, steps))
    return turns, system


# --- running and reporting ------------------------------------------------------------

def _runtime(args: argparse.Namespace) -> Tuple[Any, Dict[str, Any], Optional[tempfile.TemporaryDirectory]]:
    if args.threshold is not None and args.ratio is not None and args.ratio >= args.threshold:
        raise CliError("--ratio %g must be below --threshold %g" % (args.ratio, args.threshold))
    tmp = None
    if args.store:
        store_dir = str(Path(args.store).expanduser().resolve())
    else:
        tmp = tempfile.TemporaryDirectory(prefix="tdo-demo-")
        store_dir = tmp.name
    overrides = {"TENCENTDB_OFFLOAD_STORE_DIR": store_dir}
    if args.threshold is not None:
        overrides["TENCENTDB_OFFLOAD_THRESHOLD"] = repr(args.threshold)
    if args.ratio is not None:
        overrides["TENCENTDB_OFFLOAD_COMPACT_RATIO"] = repr(args.ratio)
    if args.gateway:
        overrides["TENCENTDB_OFFLOAD_GATEWAY_URL"] = args.gateway
    env, block, _settings, _warnings = resolve_settings(overrides)
    runtime = build_runtime(env=env, block=block)
    info: Dict[str, Any] = {"store_dir": store_dir, "store_kept": tmp is None,
                            "warnings": list(runtime.warnings)}
    if not runtime.settings.enabled or runtime.store is None:
        runtime.close()
        if tmp is not None:
            tmp.cleanup()
        raise CliError(runtime.store_error or "TENCENTDB_OFFLOAD_ENABLED is false: the engine "
                       "would pass messages through")
    if runtime.client is None:
        info.update(mode="local", reason="no Gateway configured (TENCENTDB_OFFLOAD_GATEWAY_URL=off)")
        return runtime, info, tmp
    url = runtime.settings.gateway_url
    try:
        health = runtime.client.health(force=True, timeout=2.0)
        try:      # the credentials too: a refused key would only show as failed compactions
            runtime.client.query_mmd("tdo-demo-probe-%s" % uuid.uuid4().hex[:8], limit=1)
        except GatewayRejected as exc:
            if exc.status in (401, 403):
                raise GatewayError("it refused the API key / instance id: %s; see `doctor`" % exc)
        info.update(mode="gateway", reason="Gateway %s is healthy (version %s)"
                    % (url, health.get("version") or "?"), gateway_url=url)
        return runtime, info, tmp
    except GatewayError as exc:
        runtime.close()
        env["TENCENTDB_OFFLOAD_GATEWAY_URL"] = "off"
        runtime = build_runtime(env=env, block=block)
        info.update(mode="local", reason="Gateway %s not usable (%s)" % (url, exc))
        return runtime, info, tmp


def run(args: argparse.Namespace, session: List[Tuple[Optional[Message], List[Step]]],
        system_prompt: str, label: str, source: Dict[str, Any]) -> int:
    runtime, info, tmp = _runtime(args)
    try:
        sid = "%s-%s" % (label, uuid.uuid4().hex[:8])
        driver = Driver(runtime, sid, args.context_length, system_prompt, TOOLS)
        for user, steps in session:
            driver.run_turn(user, steps)
        recall = driver.recall()
        if runtime.worker is not None:
            runtime.flush(None, 5.0)
        runtime.flush_writes()
        report = build_report(driver, info, args, source, recall)
    finally:
        runtime.close()
        if tmp is not None:
            tmp.cleanup()
    if args.json:
        print(json.dumps(report, ensure_ascii=False, indent=2, default=str))
    else:
        print(render(report))
    problems = report["summary"]["problems"]
    if problems:
        sys.stderr.write("tencentdb-offload %s: %s\n" % (args.command, "; ".join(problems)))
        return 1
    return 0


def build_report(d: Driver, info: Dict[str, Any], args: argparse.Namespace,
                 source: Dict[str, Any], recall: Dict[str, Any]) -> Dict[str, Any]:
    rt, status = d.rt, d.engine.get_status()
    stats = status["session_stats"]
    largest = max((r["prompt_tokens"] for r in d.requests), default=0)
    invalid = [r for r in d.requests if not r["valid"]]
    archived = rt.store.count_archived(status["session"]) if rt.store is not None else 0
    store_stats = rt.store.stats() if rt.store is not None else {}
    problems = []
    if invalid:
        problems.append("%d of %d requests were not valid message sequences" % (len(invalid), len(d.requests)))
    if largest > d.ctx:
        problems.append("largest request %d tokens exceeds the %d-token window" % (largest, d.ctx))
    if d.originals and not recall.get("ok"):
        problems.append("recall of %s failed: %s" % (recall.get("tool_call_id"),
                                                    recall.get("reason", "text differs from the original")))
    s = rt.settings
    return {
        "command": args.command, "source": source, "mode": info["mode"], "mode_reason": info["reason"],
        "session_id": d.sid, "conversation": status["session"],
        "gateway_session": status["gateway_session"] if info["mode"] == "gateway" else None,
        "store_dir": info["store_dir"], "store_kept": info["store_kept"],
        "context_length": d.ctx, "threshold": s.threshold, "ratio": s.compact_ratio,
        "threshold_tokens": d.engine.threshold_tokens, "target_tokens": int(d.ctx * s.compact_ratio),
        "turns": d.turns, "compactions": d.compactions,
        "summary": {
            "turns": len(d.turns), "messages_read": source.get("messages", 0),
            "messages_now": len(d.messages), "requests": len(d.requests),
            "invalid_requests": len(invalid), "invalid_examples": invalid[:3],
            "compactions": len(d.compactions),
            "gateway_compactions": sum(1 for c in d.compactions if c["path"].startswith("gateway")),
            "local_compactions": sum(1 for c in d.compactions if not c["path"].startswith("gateway")),
            "no_progress_calls": d.no_progress,
            "levels": dict(stats["levels"]),
            "tokens_saved": sum(max(0, c["tokens_before"] - c["tokens_after"]) for c in d.compactions),
            "largest_request_tokens": largest,
            "largest_request_pct": round(100.0 * largest / d.ctx, 1),
            "archived_items": archived, "tool_results": len(d.originals),
            "calibration": status["calibration"],
            "outbox_backlog": store_stats.get("outbox_backlog", 0),
            "delivered": store_stats.get("delivered", 0),
            "errors": list(rt.errors), "warnings": info["warnings"],
            "problems": problems},
        "recall": recall,
    }


def cmd_demo(args: argparse.Namespace) -> int:
    if args.turns > 1000:
        raise CliError("--turns %d is too many (at most 1000)" % args.turns)
    session = synthetic_session(args.turns, args.seed)
    count = sum(1 + sum(1 + len(r) for _a, r in steps) for _u, steps in session)
    return run(args, session, SYSTEM_PROMPT, "demo-%d" % args.seed,
               {"kind": "synthetic", "turns": args.turns, "seed": args.seed, "messages": count})


def cmd_replay(args: argparse.Namespace) -> int:
    messages, system, source = load_source(args.source, args.session)
    turns, inline_system = split_turns(messages)
    if not turns:
        raise CliError("%s holds no conversation to replay" % args.source)
    source["messages"] = len(messages)
    return run(args, turns, system or inline_system or SYSTEM_PROMPT, "replay", source)
