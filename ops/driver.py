"""``demo`` and ``replay``: drive the engine through a session exactly as Hermes does.

Per turn the driver does what the host's agent loop does (a host that selects context when the
engine set itself up for one, else one that does not; ``ops.host_emulation`` has the figures
each passes to ``should_compress``): the turn-start preflight check, the ``pre_llm_call`` hook,
then per API call the pre-API pressure check, the ``llm_request`` middleware (or
``select_context`` on a host that selects context), a simulated provider reply whose
``prompt_tokens`` is a fixed function of the request size (so the engine's calibration is
exercised), ``update_from_response``, one ``post_tool_call`` per tool call and
``should_compress(last_prompt_tokens)`` → ``compress`` (on a host that selects context: else
``prune_tool_results_only``, and ``on_turn_complete`` at the turn's end).
A simulated reply takes no time, where a real one takes seconds: on a host that selects context
and pools compression a Gateway compaction prepared ahead runs meanwhile, so there the driver
waits for one in flight at each reply and turn start (``waited_s``), or the demo would show the
pool's 0.5 s limit, not the product.
Every request is checked with ``messages.validation_errors``. The report (shared by both
commands) shows every compaction, the context size per turn and a recall of an archived item.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any, Dict, List, Optional, Tuple

from ..session.record import Compaction
from ..archive.recall import READ
from ..context import messages
from ..context.heartbeat import is_heartbeat_call
from ..hooks import HookHandlers
from ..host.wiring import open_session
from ..runtime.process import Runtime
from .host_emulation import SELECTING, Pressure, detected_host

Message = Dict[str, Any]
Step = Tuple[Message, List[Message]]          # an assistant message and the results answering it
PROVIDER_FRAMING = 600                        # tokens a provider adds around every request
PROVIDER_CHARS_PER_TOKEN = 3.6
_CJK = re.compile("[\u3000-\u303f\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uff00-\uffef]")


def provider_tokens(request: Dict[str, Any]) -> int:
    """The simulated provider's ``prompt_tokens``: ~3.6 chars per token, one per CJK char,
    4 per message, plus framing. Deliberately not our own estimate, so calibration has work."""
    chars = cjk = 0
    for m in request.get("messages") or ():
        text = messages.text_of(m)
        chars += len(text) + 4 * PROVIDER_CHARS_PER_TOKEN
        cjk += len(_CJK.findall(text))
    schema = json.dumps(request.get("tools") or [], ensure_ascii=False)
    return int(PROVIDER_FRAMING + (chars - cjk + len(schema)) / PROVIDER_CHARS_PER_TOKEN + cjk * 1.0)




class Driver:
    """One Hermes session (one agent, one session id) over one runtime."""

    def __init__(self, runtime: Runtime, session_id: str, context_length: int,
                 system_prompt: str, tools: List[Dict[str, Any]], host: str = "") -> None:
        self.rt = runtime
        self.host = host or detected_host()     # whose checks and estimates to emulate
        self.pressure = Pressure(self.host)
        self.sid = session_id
        self.ctx = context_length
        self.engine = open_session(runtime, session_id, context_length, model="tdo-demo",
                                   hermes_home="", platform="cli", conversation_id=None)
        self.hooks = HookHandlers(runtime)
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
        self.waited_s = 0.0     # waited for compactions prepared ahead (a real reply's time)

    # -- one turn ---------------------------------------------------------------------
    def run_turn(self, user: Optional[Message], steps: List[Step]) -> None:
        self.turn_no += 1
        first_request = len(self.requests)
        first_compaction = len(self.compactions)
        injected = ""
        if user is not None:
            self._reply_time()          # the user's pause before this turn
            self.messages.append(user)
            req = self._request("")
            rough = self.pressure.before_request(req, self.messages)
            if (len(self.messages) > self.engine.protect_first_n + self.engine.protect_last_n + 1
                    or rough >= self.engine.threshold_tokens):
                if not self._defers(rough) and self.engine.should_compress(rough):
                    self._compress(rough, "preflight")
            out = self.hooks.pre_llm_call(
                session_id=self.sid, task_id="", turn_id=str(self.turn_no),
                user_message=messages.text_of(user), conversation_history=list(self.messages),
                is_first_turn=self.turn_no == 1, model="tdo-demo", platform="cli", sender_id="")
            if isinstance(out, dict) and out.get("context"):
                injected = str(out["context"])
        for assistant, results in steps:
            self._api_call(assistant, injected)
            if not results:
                continue
            args_by_id = messages.call_args(assistant)
            for r in results:
                self.messages.append(r)
                for tid, text in messages.tool_results(r):
                    name, raw_args = args_by_id.get(tid, (str(r.get("tool_name") or ""), "{}"))
                    args = _json_or_text(raw_args)
                    self.originals.setdefault(tid, (name, text, args))
                    self.hooks.post_tool_call(
                        tool_name=name, args=args, result=text,
                        session_id=self.sid, tool_call_id=tid, task_id="", turn_id=str(self.turn_no),
                        duration_ms=12, status="ok", error_message=None)
            tokens = self.pressure.after_tools(self.engine, self._request(""), self.messages)
            if tokens is not None and self.engine.should_compress(tokens):
                self._compress(tokens, "after tools")
            elif self.host == SELECTING:        # the host's cheap step when it does not compact
                self.engine.prune_tool_results_only(list(self.messages), current_tokens=tokens)
        if self.host == SELECTING:
            self.engine.on_turn_complete(messages=list(self.messages))
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
            idx = messages.newest_real_user(msgs)
            if idx >= 0:
                content = msgs[idx].get("content")
                text = content if isinstance(content, str) else messages.text_of(msgs[idx])
                msgs[idx] = messages.with_content(msgs[idx], text + "\n\n" + injected)
        return {"model": "tdo-demo", "messages": [self.system] + msgs, "tools": self.tools}

    def _api_call(self, assistant: Message, injected: str) -> None:
        request = self._request(injected)
        rough = self.pressure.before_request(request, self.messages)
        if (self.host != SELECTING or not self._defers(rough)) and \
                self.engine.should_compress(rough):            # the pre-API pressure check
            self._compress(rough, "pre-API")
            request = self._request(injected)
        request = self._as_sent(request)
        self._reply_time()
        prompt = provider_tokens(request)
        errors = messages.validation_errors(request["messages"])
        self.requests.append({"turn": self.turn_no, "messages": len(request["messages"]),
                              "prompt_tokens": prompt, "valid": not errors, "errors": errors[:3]})
        completion = max(1, len(messages.text_of(assistant)) // 4)
        self.pressure.priced(prompt, completion, len(self.messages))
        self.messages.append(assistant)
        self.engine.update_from_response({
            "prompt_tokens": prompt, "completion_tokens": completion,
            "total_tokens": prompt + completion, "input_tokens": prompt,
            "output_tokens": completion, "cache_read_tokens": 0, "cache_write_tokens": 0,
            "reasoning_tokens": 0})

    def _reply_time(self) -> None:
        """What a real reply or pause gives a compaction prepared ahead (a selecting host):
        time to land, here at most one ``/compact``'s deadline."""
        if self.host != SELECTING or self.rt.client is None:
            return
        started = time.monotonic()
        self.rt.ahead.settle(self.rt.registry.conversation_of(self.sid),
                             self.rt.settings.timeout_ms / 1000.0)
        self.waited_s += time.monotonic() - started

    def _defers(self, tokens: int) -> bool:
        """The host skips a rough-estimate check while the engine waits for real usage; an
        anchored figure (a selecting host's) is real usage already and never waits."""
        if self.pressure.anchored(self.messages) is not None:
            return False
        return bool(self.engine.should_defer_preflight_to_real_usage(tokens))

    def _as_sent(self, request: Dict[str, Any]) -> Dict[str, Any]:
        """The request after the plugin's per-request step: ``select_context`` on a host that
        selects context, else the ``llm_request`` middleware (registered only with the canvas on)."""
        if self.host == SELECTING:
            chosen = self.engine.select_context(request["messages"],
                                                conversation_messages=list(self.messages))
            return dict(request, messages=chosen) if isinstance(chosen, list) else request
        if self.rt.settings.canvas:
            out = self.hooks.llm_request(request=request, session_id=self.sid)
            if isinstance(out, dict) and isinstance(out.get("request"), dict):
                return out["request"]
        return request

    def _compress(self, tokens: int, trigger: str) -> None:
        before = len(self.messages)
        result = self.engine.compress(self.messages, current_tokens=tokens, focus_topic=None,
                                      force=False)
        if not isinstance(result, list) or not result or result == self.messages:
            self.no_progress += 1
            return
        self.messages = list(result)
        # what Hermes does after a compaction
        self.pressure.forget()
        self.engine.awaiting_real_usage_after_compression = self.host == SELECTING
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
        rec = Compaction.from_json(event) if event else None
        self.compactions.append({
            "turn": self.turn_no, "trigger": trigger, "messages_before": before,
            "messages_after": len(self.messages),
            "tokens_before": rec.tokens_before if rec else tokens,
            "tokens_after": rec.tokens_after if rec else 0,
            "level": rec.level.value if rec else "", "path": rec.route.value if rec else "?",
            "via_gateway": bool(rec and rec.via_gateway), "archived": rec.archived if rec else 0,
            "error": rec.error if rec else "", "describe": rec.describe() if rec else ""})

    # -- the end: recall one archived item ---------------------------------------------
    def recall(self) -> Dict[str, Any]:
        context = "\n".join(messages.text_of(m) for m in self.messages)
        # the recall tools' own results are never archived (a digest a session file carries
        # travels as one): there is nothing to read back
        own = {s.get("name") for s in self.engine.get_tool_schemas()}
        candidates = {tid: o for tid, o in self.originals.items() if o[0] not in own}
        pick = None
        for tid, (name, text, args) in candidates.items():
            if is_heartbeat_call(name, args):
                continue
            if text and text not in context:
                pick = tid
                break
        if pick is None and candidates:
            pick = next(iter(candidates))
        if pick is None:
            return {"ok": False, "reason": "no tool result in this session"}
        name, original, _args = self.originals[pick]
        text, error = read_whole(self.engine, pick)
        if text is None:
            return {"ok": False, "tool_call_id": pick, "tool_name": name, "reason": error}
        return {"ok": text == original, "tool_call_id": pick, "tool_name": name,
                "chars": len(text), "original_chars": len(original),
                "left_context": original not in context, "identical": text == original,
                "preview": text[:120]}


def read_whole(engine: Any, key: str) -> Tuple[Optional[str], str]:
    """(the whole text ``tdai_read_cos`` reads under ``key``, page after page as a model would,
    ""), or (None, the tool's error). Every page, however long the text (a cap of 200 pages
    called a 41 MB read "differs"; the tool sizes a page to what the host shows whole): a
    reply that does not move on ends it."""
    got, offset = [], 0
    while isinstance(offset, int):
        reply = json.loads(engine.handle_tool_call(
            READ, {"tool_call_id": key, "offset": offset, "limit": 100_000}, messages=[]))
        if not reply.get("ok"):
            return None, reply.get("error", "?")
        got.append(reply["content"])
        nxt = reply.get("next_offset")
        offset = nxt if isinstance(nxt, int) and nxt > offset else None
    return "".join(got), ""


def _json_or_text(raw: Any) -> Any:
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except ValueError:
            return raw
    return raw


