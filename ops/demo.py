"""``demo`` and ``replay``: a synthetic or recorded session through the driver, then the report."""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, Dict, List, Optional, Set, Tuple

from .. import build_runtime
from ..context.messages import is_real_user, role, text_of
from ..common.humanize import count
from ..memory_gateway.client import GatewayError, GatewayRejected
from .calibrate import schema_tokens, stand_in
from .driver import Driver, Message, Step
from .host_emulation import SELECTING
from ..hermes.config import ConfigFile
from ..archive.readonly import connect
from .env import MIN_WINDOW, CliError, resolve_settings, value_origin
from .replay import load_source
from .report import render

DEFAULT_WINDOW = 128_000

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
        r = role(m)
        if r == "system":
            system = system or text_of(m)
            continue
        if is_real_user(m):
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
    tmp = None
    if args.store:
        store_dir = str(Path(args.store).expanduser().resolve())
        if Path(store_dir).exists() and not Path(store_dir).is_dir():
            raise CliError("--store %s is not a directory: name a directory for the archive "
                           "(created if missing)" % args.store)
    else:
        try:
            tmp = tempfile.TemporaryDirectory(prefix="tdo-demo-")
        except OSError as exc:      # tempfile's own words blame no directory on a full disk
            raise CliError("cannot create a temporary store (%s): free space in the temporary "
                           "folder, or keep the archive elsewhere with --store DIR"
                           % (exc.strerror or exc))
        store_dir = tmp.name
    overrides = {"TENCENTDB_OFFLOAD_STORE_DIR": store_dir}
    if args.threshold is not None:
        overrides["TENCENTDB_OFFLOAD_THRESHOLD"] = repr(args.threshold)
    if args.ratio is not None:
        overrides["TENCENTDB_OFFLOAD_COMPACT_RATIO"] = repr(args.ratio)
    # never the configured Gateway: a demo or replay would land in the user's real memory
    overrides["TENCENTDB_OFFLOAD_GATEWAY_URL"] = args.gateway or "off"
    env, config, _settings, _warnings = resolve_settings(overrides)
    runtime = build_runtime(env=env, block=config.block(), host_config=config)
    info: Dict[str, Any] = {"store_dir": store_dir, "store_kept": tmp is None,
                            "warnings": list(runtime.warnings)}
    info.update(_window(args, config),
                threshold_from=value_origin(args.threshold, "THRESHOLD", env, config, info["warnings"]),
                ratio_from=value_origin(args.ratio, "COMPACT_RATIO", env, config, info["warnings"]))
    if not runtime.settings.enabled or runtime.store is None:
        _close(runtime, tmp)
        raise CliError(runtime.store_error or "TENCENTDB_OFFLOAD_ENABLED is false: the engine "
                       "would pass messages through")
    if runtime.client is None:
        info.update(mode="local", reason="local only: %s never uses the configured Gateway (it "
                    "would store this session in your memory); --gateway URL tests one" % args.command)
        return runtime, info, tmp
    url = runtime.settings.gateway_url
    try:
        health = runtime.client.health(force=True, timeout=2.0)
        try:      # the credentials too: a refused key would only show as failed compactions
            runtime.client.query_mmd("tdo-demo-probe-%s" % uuid.uuid4().hex[:8], limit=1)
        except GatewayRejected as exc:
            if exc.auth_refused:
                raise GatewayError("it refused the API key / instance id: %s; see `doctor`" % exc)
        info.update(mode="gateway", reason="Gateway %s is healthy (version %s)"
                    % (url, health.get("version") or "?"), gateway_url=url)
        return runtime, info, tmp
    except GatewayError as exc:
        runtime.close()
        env["TENCENTDB_OFFLOAD_GATEWAY_URL"] = "off"
        runtime = build_runtime(env=env, block=config.block())
        info.update(mode="local", reason="Gateway %s not usable (%s)" % (url, exc))
        return runtime, info, tmp


def _window(args: argparse.Namespace, config: ConfigFile) -> Dict[str, Any]:
    """The context window: the flag, else (replay) the session's ``model.context_length``."""
    if args.context_length:
        return {"context_length": args.context_length, "window_from": "--context-length"}
    value = config.get("model", "context_length")
    if args.command == "replay" and isinstance(value, int) and not isinstance(value, bool):
        if value < MIN_WINDOW:
            raise CliError("model.context_length in %s is %s, below Hermes' minimum of %s; "
                           "give --context-length N" % (config.path, count(value), count(MIN_WINDOW)))
        return {"context_length": value, "window_from": "model.context_length in %s" % config.path}
    return {"context_length": DEFAULT_WINDOW, "window_from": "default"}


def _sent(args: argparse.Namespace, session: List[Tuple[Optional[Message], List[Step]]],
          system_prompt: str, tools: List[Dict[str, Any]]) -> Tuple[int, int, int]:
    """(prompt tokens, requests, compactions) of a quiet local pass over ``session``."""
    quiet = argparse.Namespace(**dict(vars(args), gateway=None, store=None))
    runtime, info, tmp = _runtime(quiet)
    try:
        driver = Driver(runtime, "calibrate-%s" % uuid.uuid4().hex[:8], info["context_length"],
                        system_prompt, TOOLS + tools)
        for user, steps in session:
            driver.run_turn(user, steps)
        runtime.flush_writes()
        return (sum(r["prompt_tokens"] for r in driver.requests), len(driver.requests),
                len(driver.compactions))
    finally:
        _close(runtime, tmp)


def run(args: argparse.Namespace, session: List[Tuple[Optional[Message], List[Step]]],
        system_prompt: str, label: str, source: Dict[str, Any]) -> int:
    started = time.monotonic()
    extra = schema_tokens(source, lambda tools: _sent(args, session, system_prompt, tools))
    if extra:
        source["schema_tokens_estimated"] = extra
        source.setdefault("not_reconstructed", []).append(
            "the tool schemas Hermes sent (state.db does not keep them): a stand-in of %s tokens "
            "per request, fitted to the session's usage totals and compactions" % count(extra))
    runtime, info, tmp = _runtime(args)
    try:
        sid = "%s-%s" % (label, uuid.uuid4().hex[:8])
        driver = Driver(runtime, sid, info["context_length"], system_prompt, TOOLS + stand_in(extra))
        for user, steps in session:
            driver.run_turn(user, steps)
        recall = driver.recall()
        if runtime.worker is not None:
            runtime.flush(None, 5.0)
        runtime.flush_writes()
        report = build_report(driver, info, args, source, recall)
        report["summary"]["seconds"] = round(time.monotonic() - started, 2)
    finally:
        _close(runtime, tmp)
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
    kinds = _archived_kinds(Path(info["store_dir"]), status["session"], set(d.originals))
    archived = sum(kinds.values())
    store_stats = rt.store.stats().as_dict() if rt.store is not None else {}
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
        "context_length": d.ctx, "window_from": info["window_from"], "host": d.host,
        "threshold_from": info["threshold_from"], "ratio_from": info["ratio_from"],
        "threshold": s.threshold, "ratio": s.compact_ratio,
        "threshold_tokens": d.engine.threshold_tokens, "target_tokens": s.target_tokens(d.ctx),
        "turns": [dict(t, over_trigger=t["action"] == "-" and t["peak_tokens"] >= d.engine.threshold_tokens)
                  for t in d.turns], "compactions": d.compactions,
        "summary": {
            "turns": len(d.turns), "messages_read": source.get("messages", 0),
            "messages_now": len(d.messages), "requests": len(d.requests),
            "invalid_requests": len(invalid), "invalid_examples": invalid[:3],
            "compactions": len(d.compactions),
            "gateway_compactions": sum(1 for c in d.compactions if c["via_gateway"]),
            "local_compactions": sum(1 for c in d.compactions if not c["via_gateway"]),
            "no_progress_calls": d.no_progress,
            "levels": dict(stats["levels"]),
            "tokens_saved": sum(max(0, c["tokens_before"] - c["tokens_after"]) for c in d.compactions),
            "largest_request_tokens": largest,
            "largest_request_pct": round(100.0 * largest / d.ctx, 1),
            "archived_items": archived, "tool_results": len(d.originals),
            "archived_tool_results": kinds["tool_result"],
            "archived_messages": kinds["message"],
            "calibration": status["calibration"],
            "prepared_ahead": _prepared(d, info),
            "outbox_backlog": store_stats.get("outbox_backlog", 0),
            "delivered": store_stats.get("delivered", 0),
            "errors": list(rt.errors), "warnings": info["warnings"],
            "problems": problems},
        "recall": recall,
    }


def _prepared(d: Driver, info: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """Gateway compactions prepared ahead (a host with a shared compression pool, a Gateway):
    how many were started and used, and how long the driver waited for them in place of the
    model's replies and the user's pauses. None where nothing is prepared."""
    if info["mode"] != "gateway" or d.host != SELECTING:
        return None
    ahead = d.rt.ahead.status()
    return {"started": ahead["prepared_started"], "used": ahead["prepared_used"],
            "waited_s": round(d.waited_s, 2)}


def _close(runtime: Any, tmp: Optional[tempfile.TemporaryDirectory]) -> None:
    """The runtime, then the temporary store it wrote (unless the user asked to keep it)."""
    runtime.close()
    if tmp is not None:
        tmp.cleanup()


def _archived_kinds(store_dir: Path, session: str, results: Set[str]) -> Dict[str, int]:
    """Archived rows of ``session``: the conversation's tool results as they arrived (ids in
    ``results``), and messages a compaction removed. A digest is shaped as a tool result but
    was written by an earlier compaction: when a later one removes it, it counts as a message
    (else the demo reported more results archived than the session had)."""
    conn = connect(store_dir / "store.db")
    try:
        rows = conn.execute("SELECT kind, tool_call_id FROM archive WHERE session=?", (session,)).fetchall()
    finally:
        conn.close()
    arrived = sum(1 for kind, tid in rows if kind == "tool_result" and tid in results)
    return {"tool_result": arrived, "message": len(rows) - arrived}


def cmd_demo(args: argparse.Namespace) -> int:
    session = synthetic_session(args.turns, args.seed)
    messages = sum(1 + sum(1 + len(r) for _a, r in steps) for _u, steps in session)
    return run(args, session, SYSTEM_PROMPT, "demo-%d" % args.seed,
               {"kind": "synthetic", "turns": args.turns, "seed": args.seed, "messages": messages})


def cmd_replay(args: argparse.Namespace) -> int:
    messages, system, source = load_source(args.source, args.session)
    turns, inline_system = split_turns(messages)
    if not turns:
        raise CliError("%s holds no conversation to replay" % args.source)
    source["messages"] = (len(messages) - source.get("stub_results", 0)    # as the source holds
                          + source.get("orphan_results", 0))
    return run(args, turns, system or inline_system or SYSTEM_PROMPT, "replay", source)
