"""``TencentDBOffloadEngine``: when to compact, how far, and through which path.

Decisions only: HTTP (and shrink-and-retry) lives in ``memory_gateway``, SQL in ``archive``,
message surgery in ``context``. Per-agent fields (token counters, context length, bound
conversation) are copied by ``__deepcopy__``/``clone_for_agent``; the process runtime is shared
by reference. Hosts with ``select_context`` (0.22) get the canvas per request, never persisted;
older hosts get it through ``pre_llm_call`` and with the compacted list.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Dict, List, Optional, Tuple

from .archive.recall import SCHEMAS
from .compat import HOST_SELECTS_CONTEXT, ContextEngine
from .context import canvas, departures
from .context import messages as M
from .context.fallback import has_compressible, local_compact, prune_results
from .context.tokens import PER_MESSAGE, TokenMemo, estimate_text, messages_tokens
from .session import announce_line

log = logging.getLogger("tencentdb_offload.engine")

NAME = "tencentdb-offload"
PRUNE_FROM = 0.6            # the cheap step starts at 60 % of the trigger (the warm-up point)
PER_AGENT = ("last_prompt_tokens", "last_completion_tokens", "last_total_tokens",
             "last_real_prompt_tokens", "threshold_tokens", "context_length", "compression_count",
             "threshold_percent", "protect_first_n", "protect_last_n", "_key", "_session_id", "model",
             "awaiting_real_usage_after_compression")


class TencentDBOffloadEngine(ContextEngine):
    def __init__(self, runtime: Any) -> None:
        self.runtime = runtime
        s = runtime.settings
        self.threshold_percent = s.threshold
        self.protect_first_n = s.keep_first
        self.protect_last_n = 6
        for attr in PER_AGENT[:7]:           # counters (the host reads last_real_prompt_tokens)
            setattr(self, attr, 0)
        self.awaiting_real_usage_after_compression = False   # 0.22 sets it after compactions
        self.model = ""
        self._key = "default"
        self._session_id = ""
        self._last_compress_aborted = self._last_compression_made_progress = False

    @property
    def name(self) -> str:
        return NAME

    @property
    def summary_target_ratio(self) -> float:     # 0.22 reads it for idle compaction
        return self.runtime.settings.compact_ratio / self.runtime.settings.threshold

    def __deepcopy__(self, memo: Dict[int, Any]) -> "TencentDBOffloadEngine":
        twin = self.__class__.__new__(self.__class__)
        memo[id(self)] = twin
        twin.runtime = self.runtime                 # shared, never copied
        for attr in PER_AGENT:
            setattr(twin, attr, getattr(self, attr, None))
        twin._last_compress_aborted = False
        twin._last_compression_made_progress = False
        return twin

    def clone_for_agent(self) -> "TencentDBOffloadEngine":
        return self.__deepcopy__({})

    # -- host lifecycle -----------------------------------------------------------------
    def update_model(self, model: str = "", context_length: int = 0, base_url: str = "",
                     api_key: Any = "", provider: str = "", api_mode: str = "", **_: Any) -> None:
        self.model = model or self.model
        if isinstance(context_length, int) and context_length > 0:
            self.context_length = context_length
        self.threshold_percent = self.runtime.settings.threshold   # ours, not a host override
        self.threshold_tokens = int(self.context_length * self.runtime.settings.threshold)
        self._state().threshold_tokens = self.threshold_tokens

    def on_session_start(self, session_id: str = "", **kwargs: Any) -> None:
        reg = self.runtime.registry
        old = kwargs.get("old_session_id") or ""
        if kwargs.get("boundary_reason") == "compression" and old:
            self._key = reg.link(session_id, old)     # same conversation, new Hermes id
        else:
            self._key = reg.conversation_of(session_id)
        self._session_id = session_id
        ctx = kwargs.get("context_length")
        if isinstance(ctx, int) and ctx > 0 and not self.context_length:
            self.update_model(self.model, ctx)
        self._state().threshold_tokens = self.threshold_tokens

    def on_session_end(self, session_id: str = "", messages: Any = None, **_: Any) -> None:
        self.runtime.session_ended(self._key)

    def on_session_reset(self) -> None:
        super().on_session_reset()
        self._last_compression_made_progress = False

    def bind_session_state(self, session_db: Any = None, session_id: str = "", **_: Any) -> None:
        if session_id and session_id != self._session_id:
            self._key = self.runtime.registry.conversation_of(session_id)
            self._session_id = session_id

    def _state(self):
        return self.runtime.registry.get(self._key)

    # -- budget ---------------------------------------------------------------------------
    def update_from_response(self, usage: Dict[str, Any], **_: Any) -> None:
        self.awaiting_real_usage_after_compression = False    # as the built-in does (0.22)
        if not isinstance(usage, dict):
            return
        prompt = usage.get("prompt_tokens", usage.get("input_tokens"))
        state = self._state()
        if isinstance(prompt, int) and prompt > 0:
            self.last_prompt_tokens = prompt
            self.last_real_prompt_tokens = prompt
            state.last_usage = prompt
            if state.request_estimate:
                state.calibrator.observe(state.request_estimate, prompt)
                state.request_estimate = 0
            state.stats.record_usage(prompt, usage)
        completion = usage.get("completion_tokens", usage.get("output_tokens"))
        if isinstance(completion, int) and completion >= 0:
            self.last_completion_tokens = completion
        total = usage.get("total_tokens")
        if isinstance(total, int) and total >= 0:
            self.last_total_tokens = total

    def should_compress(self, prompt_tokens: Optional[int] = None, **_: Any) -> bool:
        return self.should_compress_info(prompt_tokens)[0]

    def should_compress_info(self, prompt_tokens: Optional[int] = None,
                             **_: Any) -> Tuple[bool, Optional[str]]:
        """(run now?, why not). 0.22 prints the reason as "over the threshold but blocked", so
        there is one only for a real block: over the trigger and still not compacting."""
        tokens = self.last_prompt_tokens if prompt_tokens is None else prompt_tokens
        if (not isinstance(tokens, (int, float)) or tokens < 0 or self.threshold_tokens <= 0
                or tokens < self.threshold_tokens):
            return False, None          # unknown after a compaction, or simply below the trigger
        if not self.runtime.settings.enabled:
            return False, "tencentdb-offload is disabled (TENCENTDB_OFFLOAD_ENABLED=false)"
        return True, None

    def should_defer_preflight_to_real_usage(self, rough_tokens: int = 0, **_: Any) -> bool:
        # After a compaction our own target check already holds; wait for real usage.
        return self.awaiting_real_usage_after_compression or self.last_prompt_tokens == -1

    def pending_compression_operation(self, messages: Any = None, **_: Any) -> None:
        return None            # upstream main: None = an ordinary compaction

    def has_content_to_compress(self, messages: Any = None, **_: Any) -> bool:
        s = self.runtime.settings
        return isinstance(messages, list) and has_compressible(messages, s.keep_first, s.trim_chars)

    # -- compaction -------------------------------------------------------------------------
    def compress(self, messages: Any, current_tokens: Any = None, focus_topic: Any = None,
                 force: bool = False, memory_context: str = "", **_: Any) -> List[Dict[str, Any]]:
        """Never raises (0.17 re-runs compress on a TypeError): any failure ends in the
        local compaction, and if even that fails the list comes back unchanged."""
        self._last_compress_aborted = False
        self._last_compression_made_progress = False
        if not isinstance(messages, list) or not messages:
            return messages if isinstance(messages, list) else []
        if not self.runtime.settings.enabled:
            return messages
        try:
            return self._compress(messages, current_tokens, bool(force))
        except Exception as exc:
            self.runtime.note_error("compress failed (%s: %s)" % (type(exc).__name__, exc))
        try:   # last resort: the plain local compaction, so the host does not loop on us
            plain = local_compact([m for m in messages if isinstance(m, dict)],
                                  int(self._target() * 0.8), keep_first=self.runtime.settings.keep_first)
            if plain.changed:
                self.compression_count += 1
                return [M.fresh(m) for m in plain.messages]
        except Exception as exc:
            self.runtime.note_error("plain local compaction failed too (%s); messages kept" % exc)
        return messages

    def _target(self) -> int:
        return int((self.context_length or 128_000) * self.runtime.settings.compact_ratio)

    def _compress(self, messages: List[Dict[str, Any]], current_tokens: Any,
                  force: bool) -> List[Dict[str, Any]]:
        rt, s = self.runtime, self.runtime.settings
        state = self._state()
        started = time.monotonic()
        count = TokenMemo()
        target = self._target()
        overhead = state.overhead_estimate or rt.last_overhead_estimate
        if isinstance(current_tokens, int) and current_tokens > 0 and not state.calibrator.points:
            # no calibration yet: the host's real count of (about) this list is the best anchor;
            # what it counts beyond the messages is system prompt + tool schemas
            est = sum(map(count, messages))
            overhead = overhead or max(0, current_tokens - est)
            state.calibrator.observe(overhead + est, current_tokens)
        budget = max(256, state.calibrator.to_estimate(target) - overhead)
        before_real = state.calibrator.to_real(overhead + sum(map(count, messages)))
        if isinstance(current_tokens, int) and current_tokens > 0 and not force:
            before_real = max(before_real, current_tokens)

        recallable = rt.writer.healthy      # if not: trim harder, fewer leave, no recall promised
        trim = s.trim_chars if recallable else min(s.trim_chars, 600)
        clean, canvas_removed = canvas.strip_all(messages)
        result, level, path, report, error, cut = None, "", "local", {}, "", []
        if rt.client is not None and rt.client.available:
            result, level, report, cut, error = self._via_gateway(state, clean, target, overhead, count)
            path = "gateway" if result is not None else "local"
        block = state.canvas_text if s.canvas else ""   # (the flush above may have fetched it)
        if block:                                       # every later request carries it
            budget = max(256, budget - estimate_text(block) - PER_MESSAGE)
        if result is not None and sum(map(count, result)) > budget:
            finish = local_compact(result, budget, keep_first=s.keep_first, trim_chars=trim,
                                   archived_total=state.stats.archived, recallable=recallable,
                                   count=count)
            result, path = finish.messages, "gateway+local"
        if result is None:
            result = local_compact(clean, budget, keep_first=s.keep_first, trim_chars=trim,
                                   archived_total=state.stats.archived, recallable=recallable,
                                   count=count).messages
            level = "local"
        after_est = sum(map(count, result))
        # Fresh dicts for every message: Hermes 0.17 persists a rotated session by object
        # identity and skips objects it already saw in the old history.
        result = [M.fresh(m) for m in result]
        if len(result) == len(messages) and result == [M.fresh(m) if isinstance(m, dict) else m
                                                        for m in messages]:
            return messages
        if block and not HOST_SELECTS_CONTEXT:
            result = canvas.inject(result, block)
            state.injected_canvas_hash = canvas.digest(block)
            after_est += estimate_text(block)
        gone = departures.find(clean, result, cut)
        self.runtime.archive_departures(state, gone)
        self.compression_count += 1
        self._last_compression_made_progress = True
        event = {"path": path, "level": level, "tokens_before": before_real,
                 "tokens_after": state.calibrator.to_real(overhead + after_est),
                 "archived": gone.count, "report": report, "error": error,
                 "canvas_removed": canvas_removed, "at": rt.now(),
                 "ms": round((time.monotonic() - started) * 1000, 1),
                 "context_length": self.context_length}
        rt.record_compaction(state, event)
        return result

    def _via_gateway(self, state, clean, target, overhead, count):
        """(messages, level, report, results cut before sending, error); messages None on failure."""
        outcome, error = self.runtime.gateway_compact(
            state, clean, target=target, context_length=self.context_length or 128_000,
            overhead=overhead, count=count)
        if outcome is not None and not departures.keeps_current_turn(clean, outcome.messages):
            outcome, error = None, "Gateway reply lost the current turn"
        if outcome is None:
            self.runtime.note_error("gateway compaction failed, compacting locally: %s" % error)
            return None, "", {}, [], error
        if outcome.canvas:
            state.set_canvas(outcome.canvas, replace=False)
        state.remember_summaries(departures.gateway_summaries(outcome.messages))
        return outcome.messages, outcome.level, outcome.report, outcome.body_trimmed, ""

    def prune_tool_results_only(self, messages: Any, current_tokens: Any = None,
                                **_: Any) -> Tuple[Any, int]:
        """The cheap step (0.22): near the trigger, old long tool results are replaced by the
        Gateway's summary when one is known, else trimmed with a recall pointer. Archived first."""
        tokens = current_tokens if isinstance(current_tokens, int) else self.last_prompt_tokens
        if (not isinstance(messages, list) or not self.runtime.settings.enabled
                or self.threshold_tokens <= 0 or tokens < self.threshold_tokens * PRUNE_FROM):
            return messages, 0
        state = self._state()
        try:
            with state.lock:
                summaries = dict(state.summaries)
            pruned = prune_results(messages, protect_last=self.protect_last_n,
                                   limit=self.runtime.settings.trim_chars, summaries=summaries)
            if not pruned.trimmed:
                return messages, 0
            self.runtime.archive_departures(state, departures.find(pruned.trimmed, []))
        except Exception as exc:
            self.runtime.note_error("prune failed (%s); messages kept" % exc)
            return messages, 0
        n = sum(1 for m in pruned.trimmed for _result in M.tool_results(m))
        state.stats.pruned_results += n
        return pruned.messages, n         # markers kept: the host persisted these rows

    # -- per request and per turn (0.22) ---------------------------------------------------
    def select_context(self, request_messages: Any, *, conversation_messages: Any = None,
                       incoming_message: Any = None, budget_tokens: int = 0, **_: Any) -> Any:
        """The request as sent: calibration data, and exactly one canvas (the current one).
        Request-only: nothing here reaches the host's transcript."""
        if not isinstance(request_messages, list) or not self.runtime.settings.enabled:
            return None
        try:
            state = self._state()
            state.request_estimate = messages_tokens(request_messages)
            state.overhead_estimate = messages_tokens(m for m in request_messages
                                                      if M.role(m) == "system")
            self.runtime.last_overhead_estimate = state.overhead_estimate
            block = state.canvas_text if self.runtime.settings.canvas else ""
            out, removed = canvas.for_request(request_messages, block)
            if block and state.injected_canvas_hash != state.canvas_hash:
                state.injected_canvas_hash = state.canvas_hash
                state.stats.canvas_injections += 1
            state.stats.canvas_blocks_removed += removed
            return out
        except Exception as exc:
            self.runtime.note_error("select_context: %s" % exc)
            return None

    def on_turn_complete(self, messages: Any = None, usage: Any = None, **_: Any) -> None:
        self.runtime.turn_completed(self._key)

    def get_automatic_compaction_status_message(self, *, phase: str = "", default_message: str = "",
                                                **context: Any) -> Optional[str]:
        """The line 0.22 shows when a compaction starts: this plugin, the path, tokens and the
        target, how to recall, and how the previous compaction ended."""
        via_gateway = self.runtime.client is not None and self.runtime.client.available
        return announce_line(context.get("approx_tokens"), self._target(), via_gateway,
                             self._state().stats.last_compaction)

    # -- tools ----------------------------------------------------------------------------
    def get_tool_schemas(self, **_: Any) -> List[Dict[str, Any]]:
        if not self.runtime.settings.enabled:
            return []
        return [dict(s) for s in SCHEMAS]

    def handle_tool_call(self, name: str, args: Any = None, **_: Any) -> str:
        state = self._state()
        return self.runtime.tools.handle(name, args if args is not None else {},
                                         state.key, state.gateway_id)

    # -- status ---------------------------------------------------------------------------
    def get_status(self, **_: Any) -> Dict[str, Any]:
        ctx = self.context_length
        last = max(0, self.last_prompt_tokens)
        state = self._state()
        return {
            "last_prompt_tokens": last,
            "threshold_tokens": self.threshold_tokens,
            "context_length": ctx,
            "usage_percent": min(100.0, last / ctx * 100) if ctx else 0,
            "compression_count": self.compression_count,
            "engine": NAME,
            "mode": self.runtime.mode,
            **state.status(),
            "runtime": self.runtime.status(),
        }
