"""``TencentDBOffloadEngine``: when to compact, how far, and through which path.

Decisions only: HTTP (and shrink-and-retry) lives in ``memory_gateway``, SQL in ``archive``,
message surgery in ``context``. Per-agent fields (token counters, context length, bound
conversation) are copied by ``__deepcopy__``/``clone_for_agent``; the process runtime is shared
by reference. A host that selects context gets the canvas per request, never persisted; one
that does not gets it through ``pre_llm_call`` and with the compacted list.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Dict, List, Optional, Tuple

from .archive.recall import SCHEMAS
from .hermes import lineage
from .compaction.flow import CompactionRun, attempt_cancelled, plain_local
from .compaction import ceiling, idle, prepare, request_cut
from .hermes.compat import ContextEngine
from .hermes.host import running_host
from .context.fallback import has_compressible
from .context.messages import stored_in_order
from .context.tokens import messages_tokens, request_tokens
from .runtime.process import Runtime
from .session.state import SessionState
from .status.render import announce_line, explain_unchanged
from .settings.thresholds import applying_trigger, landing_tokens, model_threshold
from .common.peer_text import plugin_logger

log = plugin_logger("tencentdb_offload.engine")

NAME = "tencentdb-offload"
COUNTERS = ("last_prompt_tokens", "last_completion_tokens", "last_total_tokens",
            "last_real_prompt_tokens", "threshold_tokens", "context_length", "compression_count")
PER_AGENT = COUNTERS + ("threshold_percent", "protect_first_n", "protect_last_n", "_key",
                        "_session_id", "model", "awaiting_real_usage_after_compression",
                        "model_thresholds")


class TencentDBOffloadEngine(ContextEngine):
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        s = runtime.settings
        self.threshold_percent = s.threshold
        self.protect_first_n = s.keep_first
        # read only by the host's turn-start gate (more than protect_first_n + protect_last_n + 1
        # messages): 0 lets our own should_compress decide on short histories too (an idle
        # compaction on a cold cache, right after a compaction that left a few messages). The
        # messaging gateway keeps the host's 6: there its shared pool refuses work when busy,
        # and with 0 a request went over the window (docs/benchmarks.md)
        self.protect_last_n = 6 if running_host().messaging_gateway else 0
        for attr in COUNTERS:                # the host reads last_real_prompt_tokens too
            setattr(self, attr, 0)
        self.awaiting_real_usage_after_compression = False   # the host may set it after compactions
        self.model = ""
        self.model_thresholds: Dict[str, Any] = {}    # the host may set compression.model_thresholds
        self._key = "default"
        self._session_id = ""
        self._last_compress_aborted = self._last_compression_made_progress = False

    @property
    def name(self) -> str:
        return NAME

    @property
    def summary_target_ratio(self) -> float:     # the host may read it for idle compaction
        s = self.runtime.settings
        if self.context_length and self.threshold_tokens:
            return self.ordinary_target() / self.threshold_tokens
        return s.compact_ratio / s.threshold

    def __deepcopy__(self, memo: Dict[int, Any]) -> "TencentDBOffloadEngine":
        twin = self.__class__.__new__(self.__class__)
        memo[id(self)] = twin
        twin.runtime = self.runtime                 # shared, never copied
        for attr in PER_AGENT:
            setattr(twin, attr, getattr(self, attr, None))
        twin._last_compress_aborted = twin._last_compression_made_progress = False
        return twin

    def clone_for_agent(self) -> "TencentDBOffloadEngine":
        return self.__deepcopy__({})

    # -- host lifecycle -----------------------------------------------------------------
    def update_model(self, model: str = "", context_length: int = 0, base_url: str = "",
                     api_key: Any = "", provider: str = "", api_mode: str = "", **_: Any) -> None:
        self.model = model or self.model
        if isinstance(context_length, int) and context_length > 0:
            self.context_length = context_length
        s = self.runtime.settings
        named = self._threshold_for(self.model, provider)
        self.threshold_percent = s.threshold if named is None else named
        # a host that checks every request: the built-in's small-window trigger, later in its
        # messaging gateway
        host = running_host()
        trigger = applying_trigger(s, self.context_length, model_ratio=named,
                                   messaging=host.checks_every_request, host_floor=host.small_window_floor)
        self.threshold_tokens = trigger.tokens
        self.current_state().use_trigger(trigger.tokens, trigger)

    def _threshold_for(self, model: str, provider: str = "") -> Optional[float]:
        """The ``compression.model_thresholds`` value for this model, None when none applies."""
        return model_threshold(getattr(self, "model_thresholds", None), model, provider,
                               floor=self.runtime.settings.compact_ratio)

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
        self.current_state().use_trigger(self.threshold_tokens)

    def on_session_end(self, session_id: str = "", messages: Any = None, **_: Any) -> None:
        self.runtime.session_ended(self._key)

    def on_session_reset(self) -> None:
        super().on_session_reset()
        self._last_compression_made_progress = False

    def bind_session_state(self, session_db: Any = None, session_id: str = "", **_: Any) -> None:
        if session_id and session_id != self._session_id:
            self._key = lineage.bind(self.runtime.registry, session_db, session_id)
            self._session_id = session_id

    def current_state(self) -> SessionState:
        return self.runtime.registry.get(self._key)

    # -- budget ---------------------------------------------------------------------------
    def update_from_response(self, usage: Dict[str, Any], **_: Any) -> None:
        """Never raises: the host calls it inside its API-call retry loop, so an error here
        would be retried as a failed provider call."""
        self.awaiting_real_usage_after_compression = False    # as the host's built-in does
        if not isinstance(usage, dict):
            return
        try:
            self._take_usage(usage)
        except Exception as exc:
            log.debug("update_from_response failed", exc_info=True)
            self.runtime.note_error("usage not recorded (%s: %s)" % (type(exc).__name__, exc), self._key)

    def _take_usage(self, usage: Dict[str, Any]) -> None:
        prompt = usage.get("prompt_tokens", usage.get("input_tokens"))
        state = self.current_state()
        if isinstance(prompt, int) and prompt > 0:
            after_compaction = idle.responded(self.runtime, state, prompt, usage)
            self.last_prompt_tokens = prompt
            self.last_real_prompt_tokens = prompt
            estimate = state.response_measured(prompt)
            if estimate:
                state.calibrator.observe(estimate, prompt)
                self.runtime.leave_for_next_process(state.key, "calibration", state.calibrator.export())
            state.record_usage(prompt, usage, after_compaction)
            self.runtime.record_request(state, prompt, usage, self.context_length,
                                        self.threshold_tokens)
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
        """(run now?, why not). The host may print the reason as "over the threshold but blocked", so
        there is one only for a real block: over the trigger and still not compacting."""
        tokens = self.last_prompt_tokens if prompt_tokens is None else prompt_tokens
        if self.current_state().compact_transcript and self.runtime.settings.enabled:
            return True, None               # its last request was cut for itself (request_cut)
        if (not isinstance(tokens, (int, float)) or tokens < 0 or self.threshold_tokens <= 0
                or tokens < self.threshold_tokens):
            return (not running_host().selects_context and    # a turn start with no preflight
                    idle.wanted(self, tokens)), None
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
        """The compacted list, in the order the host will store and reload it (a host may reload
        a session by timestamp: ``stored_in_order``)."""
        result = self._compress(messages, current_tokens, focus_topic, force, memory_context)
        return result if result is messages else stored_in_order(result)

    def _compress(self, messages: Any, current_tokens: Any, focus_topic: Any, force: bool,
                  memory_context: str) -> List[Dict[str, Any]]:
        """Never raises (a host may re-run compress on a TypeError): any failure ends in the
        local compaction, and if even that fails the list comes back unchanged. Re-entrant: a
        host that pools compression may call it again on this instance while a stalled call
        still runs."""
        cancelled = attempt_cancelled(self)
        self._last_compress_aborted = False
        self._last_compression_made_progress = False
        if not isinstance(messages, list) or not messages or not self.runtime.settings.enabled:
            return messages if isinstance(messages, list) else []
        # held: never evicted before its result lands (a subagent may rebind a shared engine)
        state, target = self.runtime.registry.get(self._key, hold=True), None
        try:
            reason = "manual" if force else idle.start(self.runtime, state)
            if reason == "threshold" and ceiling.passes_next(self, self.estimate_real(messages)):
                reason = "ceiling"          # a turn start before a step that would pass it
            caught_up = request_cut.catch_up(self, messages, reason, cancelled)
            if caught_up is not None:           # the last request cut's bytes: already
                return self._landed(state, caught_up[1], caught_up[0], repin=False)    # pin kept
            deep = reason in ("idle", "ceiling")     # nothing fresh to keep: land deep
            target = self.deepest_target() if reason == "ceiling" else \
                self.compaction_target(deep=deep)          # this call's, not shared
            run = CompactionRun(self, messages, cancelled, memory_context, focus_topic,
                                wait_gateway=not deep, state=state, target=target)
            result, record = run.run(current_tokens, bool(force))
            if not cancelled():
                state.transcript_due(False)
            if record is not None:
                self._landed(state, replace(record, reason=reason))
            elif force and run.planned is not None and not cancelled():
                # Hermes only prints "No changes from compression": say why, where it logs
                log.warning("%s", explain_unchanged(run.planned.before, target,
                                                    self.threshold_tokens, len(messages)))
            return result
        except Exception as exc:
            log.debug("compress failed", exc_info=True)
            self.runtime.note_error("compress failed (%s: %s)" % (type(exc).__name__, exc), self._key)
            result = plain_local(self, messages, cancelled, state, target)   # the last resort
            if result is not messages:
                with state.lock:
                    self.compression_count += 1
            return result
        finally:
            self.runtime.registry.release(state.key)

    def _landed(self, state: SessionState, record: Any, result: Any = None, repin: bool = True) -> Any:
        with state.lock:
            self.compression_count += 1
            if repin:       # the next request is a rewrite anyway: it may show the current canvas
                state.canvas_repin = True
        self._last_compression_made_progress = True
        self.runtime.record_compaction(state, record)
        return result

    def compaction_target(self, deep: bool = False) -> int:    # deep: idle, on a cold cache
        target = self.ordinary_target()
        return idle.idle_target(target) if deep else target

    def deepest_target(self) -> int:
        """Where a turn start before a step that would pass the ceiling lands: down to the system
        prompt and tool schemas. What the model has read goes behind recall; the digest and the
        current turn stay over it. A smaller prefix is read by every later request and leaves
        the most room before the next rewrite (issue 55)."""
        return max(1, min(self.compaction_target(deep=True), self.estimate_real([])))

    def ordinary_target(self) -> int:
        """The ordinary target: the digest is sized for it even when an idle one lands deeper."""
        return landing_tokens(self.runtime.settings, self.context_length or 128_000,
                              running_host().checks_every_request,
                              self.threshold_percent)     # (a model's: whether a cap binds)

    def estimate_real(self, messages: List[Any]) -> int:
        """Provider tokens of a request carrying ``messages``: our estimate, calibrated."""
        state = self.current_state()
        overhead = state.overhead_estimate or self.runtime.last_overhead_estimate
        state.calibrator.bound(self.context_length)     # an inherited fit stays physical
        return state.calibrator.to_real(overhead + messages_tokens(messages))

    def should_compress_preflight(self, messages: Any = None, **_: Any) -> bool:
        """Turn start (the preflight): a fresh agent or process knows no usage yet, and the host's
        rough count can be under the provider's; our calibrated estimate decides too."""
        if not isinstance(messages, list) or self.threshold_tokens <= 0:
            return False
        try:
            self.current_state().cache.turn_started()
            estimate = self.estimate_real(messages)    # past the trigger, idle on a cold cache,
            return self.runtime.settings.enabled and (  # or the next step would pass the ceiling
                estimate >= self.threshold_tokens or idle.wanted(self, estimate)
                or ceiling.passes_next(self, estimate))
        except Exception:       # said (once): the host would stop compacting at turn starts unseen
            self.runtime.note_fault("the turn-start check (preflight) failed", self._key)
            return False

    def prune_tool_results_only(self, messages: Any, current_tokens: Any = None,
                                **_: Any) -> Tuple[Any, int]:
        """The host's cheap step after every tool round. Its result is never persisted: every new
        process or agent reloads the unpruned history, so each prune would cost two cache
        breaks and win nothing durable. We prune nothing; near the trigger we prepare the
        Gateway compaction instead, so the real one (persisted) is quick."""
        prepare.ahead(self, messages, current_tokens)
        return messages, 0

    # -- per request and per turn (a host that selects context) ----------------------------
    def select_context(self, request_messages: Any, *, conversation_messages: Any = None,
                       incoming_message: Any = None, budget_tokens: int = 0, **_: Any) -> Any:
        """The request as sent: calibration data, exactly one canvas (the current one), and a
        cut when the host sends it near the window uncompacted (``request_cut``).
        Request-only: nothing here reaches the host's transcript."""
        if not isinstance(request_messages, list) or not self.runtime.settings.enabled:
            return None
        try:
            state = self.current_state()
            overhead, estimate = request_tokens(request_messages)
            state.request_measured(overhead, estimate)
            self.runtime.last_overhead_estimate = overhead
            smaller = request_cut.cut(self, request_messages, estimate)
            if smaller is not None:             # the host did not compact in time
                request_messages = smaller
                state.request_measured(*request_tokens(smaller))
            block = state.canvas_text if self.runtime.settings.canvas else ""
            out, removed = self.runtime.request_view.build(state, request_messages, block)
            state.record_canvas_removed(removed)
            return request_messages if out is None and smaller is not None else out
        except Exception as exc:
            log.debug("select_context failed", exc_info=True)
            self.runtime.note_error("select_context: %s" % exc, self._key)
            return None

    def on_turn_complete(self, messages: Any = None, usage: Any = None, **_: Any) -> None:
        self.runtime.turn_completed(self._key)
        prepare.ahead(self, messages, turn_end=True)

    def get_automatic_compaction_status_message(self, *, phase: str = "", default_message: str = "",
                                                **context: Any) -> Optional[str]:
        """The line the host shows when a compaction starts: this plugin, the path, tokens and the
        target, how to recall, and how the previous compaction ended."""
        rt = self.runtime
        via_gateway = rt.gateway.available
        return announce_line(context.get("approx_tokens"), self.compaction_target(), via_gateway,
                             self.current_state().last_compaction,
                             "" if rt.settings.gateway_configured else
                             " at the default URL %s (not configured)" % rt.settings.gateway_url)

    # -- tools ----------------------------------------------------------------------------
    def get_tool_schemas(self, **_: Any) -> List[Dict[str, Any]]:
        if not self.runtime.settings.enabled:
            return []
        return [dict(s) for s in SCHEMAS]

    def handle_tool_call(self, name: str, args: Any = None, **_: Any) -> str:
        state = self.current_state()
        return self.runtime.tools.handle(name, args if args is not None else {}, self.runtime.scope_for(
            state.key, state.parents), state.gateway_id, window=self.context_length)

    # -- status ---------------------------------------------------------------------------
    def get_status(self, **_: Any) -> Dict[str, Any]:
        ctx = self.context_length
        last = max(0, self.last_prompt_tokens)
        state = self.current_state()
        return {
            "last_prompt_tokens": last, "threshold_tokens": self.threshold_tokens,
            "context_length": ctx, "usage_percent": min(100.0, last / ctx * 100) if ctx else 0,
            "compression_count": self.compression_count, "engine": NAME, "mode": self.runtime.mode,
            **state.status(),
            "prompt_cache": idle.snapshot(self.runtime, state),
            "runtime": self.runtime.status(self.runtime.scope_for(state.key, state.parents)),
        }
