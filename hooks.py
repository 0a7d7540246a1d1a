"""Hermes hook handlers: ``post_tool_call``, ``pre_llm_call`` and (on a host that does not select
context) the ``llm_request`` guard.

Bound to the process runtime (not to an engine copy) and routed by the ``session_id`` kwarg
Hermes passes. None of them does network I/O or waits on disk: they update in-memory
session state and hand rows to the store writer. None of them ever raises into Hermes, and
nothing a model or tool produces (any nesting, any code point) stops a result being archived.
"""

from __future__ import annotations

import hashlib
import json
import math
import uuid
from typing import Any, Dict, List, Optional

from .hermes.host import running_host
from .context import recall_blocks, result_keys
from .context import messages
from .context.heartbeat import is_heartbeat_call, is_heartbeat_prompt
from .context.sealed import SealedWork
from .common.text import clean_text
from .archive.outbox import Outbox
from .archive.store import ArchiveItem, Store
from .common.humanize import printable
from .context.tokens import request_tokens
from .memory_gateway.timestamps import gateway_timestamp
from .runtime import after_fork
from .runtime.process import Runtime
from .archive.recall import READ, SEARCH
from .common.peer_text import plugin_logger
from .common.recent_set import RecentSet

log = plugin_logger("tencentdb_offload.hooks")

ENGINE_TOOLS = (READ, SEARCH)
# Another recall tool's traffic is not the user's work: the memory provider's tools (Hermes
# names a provider's tools after it) are archived here but never sent to the Gateway.
RECALL_TOOL_PREFIXES = ("memory_tencentdb_",)
MAX_ARGS_DEPTH = 64          # deeper argument trees are cut here (json would overflow the stack)
PROMPT_CHARS = 500
RECENT_CHARS = 400
RECENT_COUNT = 10
WARMUP = 0.6


def is_internal_prompt(text: str) -> bool:
    """A turn that is not the user's work: a heartbeat poll (Hermes sends no other kind)."""
    return is_heartbeat_prompt(text)


def bounded(value: Any, depth: int = 0) -> Any:
    """``value`` with what lies deeper than ``MAX_ARGS_DEPTH`` replaced by a note, text made
    storable (lone surrogates become U+FFFD) and NaN/Infinity made text: safe to serialise on
    any thread, as standard JSON."""
    if isinstance(value, str):
        return clean_text(value)
    if depth >= MAX_ARGS_DEPTH and isinstance(value, (dict, list, tuple)):
        return "[... nested deeper than %d levels]" % MAX_ARGS_DEPTH
    if isinstance(value, dict):
        return {clean_text(str(k)): bounded(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [bounded(v, depth + 1) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)   # NaN/Infinity: Python's JSON writes them, the Gateway's refuses the body
    if value is None or isinstance(value, (bool, int, float)):
        return value
    return clean_text(str(value))


def _plain(content: Any) -> str:
    return messages.text_of({"content": content})


def recent_messages(history: Any, prompt: str, sealed: SealedWork) -> List[Dict[str, str]]:
    """The official client's rules: user/assistant text only, newest 10, each ≤ 400 chars.

    Skips tool traffic, assistants that call tools, very short texts, heartbeat polls, our own
    notices, and the message that is the prompt itself; our canvas is cut out (the Gateway
    judges the user's task, not its own canvas). Walks backwards and stops early, so a long
    history costs no more than a short one.
    """
    out: List[Dict[str, str]] = []
    if not isinstance(history, list):
        return out
    head = prompt[:200].lower()
    for msg in reversed(history):
        if len(out) >= RECENT_COUNT:
            break
        # each message is read once, and only as far as its role needs (pre_llm_call's cost)
        r = messages.role(msg)
        if r == "user":
            if messages.is_tool_result(msg):
                continue
        elif r != "assistant" or messages.calls_of(msg):
            continue
        whole = _plain(msg.get("content"))
        if sealed.is_ours(whole):
            continue
        text = sealed.strip_canvas_text(whole)[0].strip()
        if len(text) <= (5 if r == "user" else 10) or is_heartbeat_prompt(text):
            continue
        if r == "user" and head:
            low = text[:200].lower()
            if low.startswith(head) or head.startswith(low):
                continue
        out.append({"role": r, "content": text[:RECENT_CHARS]})
    out.reverse()
    return out


class HookHandlers:
    """Entry points registered with ``ctx.register_hook`` / ``register_middleware``."""

    def __init__(self, runtime: Runtime) -> None:
        self.rt = runtime
        # session ids whose current turn is a poll; bounded: a session that only ever polls
        # (a cron chat) would otherwise stay here for the life of the process
        self._heartbeat_turns = RecentSet(4 * runtime.settings.max_sessions)
        after_fork.reset_in_child(self._forked)

    def _forked(self) -> None:
        # a parent thread may have held the set's lock at the fork
        self._heartbeat_turns = RecentSet(self._heartbeat_turns.limit)

    def _failed(self, where: str, exc: BaseException, session_id: Any = "") -> None:
        # the error text may quote a tool's name or a peer's words: no terminal controls
        try:
            whose = self.rt.registry.conversation_of(session_id) if session_id else ""
        except Exception:       # noqa: BLE001 - the error is what must be kept
            whose = str(session_id)
        self.rt.note_error(printable("%s: %s" % (where, exc), limit=500, newlines=False), whose)

    # -- post_tool_call ---------------------------------------------------------------
    def post_tool_call(self, tool_name: str = "", args: Any = None, result: Any = None,
                       session_id: str = "", tool_call_id: str = "", duration_ms: Any = None,
                       error_message: Any = None, **_: Any) -> None:
        try:
            self._post_tool_call(tool_name, args, result, session_id, tool_call_id,
                                 duration_ms, error_message)
        except Exception as exc:
            self._failed("post_tool_call", exc, session_id)

    def _post_tool_call(self, tool_name: Any, args: Any, result: Any, session_id: str,
                        tool_call_id: str, duration_ms: Any, error_message: Any) -> None:
        rt = self.rt
        name = clean_text(str(tool_name or ""))
        if not rt.settings.enabled or name in ENGINE_TOOLS:
            return
        state = rt.registry.for_session_id(session_id)
        call_id = str(tool_call_id or "") or "hermes-" + uuid.uuid4().hex[:16]
        text = clean_text(result) if isinstance(result, str) else json.dumps(
            bounded(result), ensure_ascii=False, default=str)
        text_mark = result_keys.seen_mark(text)
        with state.lock:            # parallel tool calls: set-if-absent under the lock
            if not state.claim_result(call_id, text_mark):
                return              # a duplicate: same id and text (ids alone are reused)
        params = bounded(args if args is not None else {})
        ops = [Store.op_archive(state.key, [ArchiveItem(
            kind="tool_result", content=text, tool_call_id=clean_text(call_id), tool_name=name,
            role="tool", args=params)], rt.now(), rt.at_rest)]
        rt.counters.add("tool_pairs_recorded")
        if session_id in self._heartbeat_turns or is_heartbeat_call(name, params):
            rt.counters.add("heartbeat_pairs_skipped")     # archived, not the user's work
        elif name.startswith(RECALL_TOOL_PREFIXES):
            rt.counters.add("recall_pairs_skipped")
        elif rt.client is not None:
            pair: Dict[str, Any] = {"tool_name": name or "unknown",
                                    "tool_call_id": clean_text(call_id),
                                    "params": params, "result": text,
                                    "timestamp": gateway_timestamp()}
            if isinstance(duration_ms, (int, float)) and math.isfinite(duration_ms):
                pair["duration_ms"] = duration_ms
            if error_message:
                pair["error"] = clean_text(str(error_message))
            ops.append(Outbox.op_enqueue(state.key, "pair", pair, rt.now(), rt.at_rest,
                                        unconfigured=not rt.settings.gateway_configured))
        rt.writer.submit(*ops)

    # -- pre_llm_call -----------------------------------------------------------------
    def pre_llm_call(self, session_id: str = "", user_message: Any = None,
                     conversation_history: Any = None, **_: Any) -> Optional[Dict[str, str]]:
        try:
            return self._pre_llm_call(session_id, user_message, conversation_history)
        except Exception as exc:
            self._failed("pre_llm_call", exc, session_id)
            return None

    def _pre_llm_call(self, session_id: str, user_message: Any,
                      history: Any) -> Optional[Dict[str, str]]:
        rt = self.rt
        if not rt.settings.enabled:
            return None
        prompt = user_message if isinstance(user_message, str) else _plain(user_message)
        prompt = clean_text(rt.sealed.strip_canvas_text(prompt)[0]).strip()
        if is_internal_prompt(prompt):
            self._heartbeat_turns.add(session_id)
        else:
            self._heartbeat_turns.discard(session_id)
        if not prompt or is_internal_prompt(prompt):
            rt.counters.add("internal_prompts_skipped")
            return None
        state = rt.registry.for_session_id(session_id)
        recent = [{"role": m["role"], "content": clean_text(m["content"])}
                  for m in recent_messages(history, prompt, rt.sealed)]
        cut = prompt[:PROMPT_CHARS]
        digest = hashlib.md5(cut.encode("utf-8")).hexdigest()
        with state.lock:
            state.prompt, state.recent = cut, recent
            fresh = digest != state.l15_hash
            if fresh:
                state.l15_hash = digest
        if rt.client is not None:
            if fresh:
                rt.writer.submit(Outbox.op_enqueue(state.key, "prompt",
                                                  {"prompt": cut, "recent_messages": recent},
                                                  rt.now(), rt.at_rest,
                                                  unconfigured=not rt.settings.gateway_configured))
                state.ask_canvas()
            if rt.near_threshold(state):
                rt.worker.kick(state.key)     # L1 summaries should exist before compaction
        if not (rt.settings.canvas and state.canvas_hash) or running_host().selects_context:
            return None         # the canvas goes in per request (engine.select_context)
        with state.lock:
            if state.canvas_hash == state.injected_canvas_hash:
                return None
        if isinstance(history, list) and any(rt.sealed.holds_canvas(m)
                                             for m in reversed(history)):
            # the host replays the one shown with its user message: swapping it for a newer one
            # rewrites the prompt prefix from there; the next compaction shows the current one.
            # Newest first: ours sits on the user message of the last compaction or turn start,
            # so only the messages since are read
            return None
        with state.lock:
            state.injected_canvas_hash = state.canvas_hash
            text = state.canvas_text
        state.record_canvas_shown()
        return {"context": rt.sealed.sealed_canvas(text)}

    # -- llm_request middleware: one canvas per request, and calibration data ------------
    def llm_request(self, request: Any = None, session_id: str = "", **_: Any) -> Optional[Dict[str, Any]]:
        try:
            return self._llm_request(request, session_id)
        except Exception as exc:
            self._failed("llm_request", exc, session_id)
            return None

    def _llm_request(self, request: Any, session_id: str) -> Optional[Dict[str, Any]]:
        rt = self.rt
        if not isinstance(request, dict) or not rt.settings.enabled:
            return None
        msgs = request.get("messages")
        if not isinstance(msgs, list):
            return None
        state = rt.registry.for_session_id(session_id)
        state.request_measured(*request_tokens(msgs, request.get("tools")))
        rt.last_overhead_estimate = state.overhead_estimate
        # Hermes resends every past turn's <memory-context>: the first copy stays (the cached
        # prefix), identical later ones go
        deduped, copies = recall_blocks.keep_newest(msgs, oldest=True)
        fixed, removed = rt.sealed.keep_newest_canvas(deduped)
        if fixed is None and not copies:
            return None
        state.record_canvas_removed(removed)
        rt.counters.add("recall_copies_dropped", len(copies))
        out = dict(request)
        out["messages"] = fixed if fixed is not None else deduped
        return {"request": out}
