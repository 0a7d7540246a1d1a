"""``TencentDBOffloadEngine``: when to compact, how far, and through which path.

Decisions and orchestration only: HTTP lives in ``gateway_client``/``compaction``, SQL in
``store``, message surgery in ``messages``/``fallback``. Per-agent fields (token counters,
context length, bound conversation) are copied by ``__deepcopy__``; the process runtime is
shared by reference.
"""

from __future__ import annotations

import hashlib
import logging
import time
from typing import Any, Dict, List, Optional

from .context import messages as M
from .memory_gateway.compaction import GatewayCompactor
from .context.fallback import local_compact
from .memory_gateway.client import GatewayError
from .archive.store import ArchiveItem, Store
from .context.tokens import PER_MESSAGE, TokenMemo, estimate_text
from .archive.recall import SCHEMAS

try:  # inside Hermes the real ABC; plain unit tests get a minimal stand-in
    from agent.context_engine import ContextEngine  # type: ignore
except Exception:  # pragma: no cover - exercised by the unit suite without Hermes
    class ContextEngine:  # type: ignore[no-redef]
        last_prompt_tokens = 0
        last_completion_tokens = 0
        last_total_tokens = 0
        threshold_tokens = 0
        context_length = 0
        compression_count = 0
        threshold_percent = 0.75
        protect_first_n = 3
        protect_last_n = 6

        def on_session_reset(self) -> None:
            self.last_prompt_tokens = 0
            self.last_completion_tokens = 0
            self.last_total_tokens = 0
            self.compression_count = 0

log = logging.getLogger("tencentdb_offload.engine")

NAME = "tencentdb-offload"
OFFLOADED_MARK = "[Offloaded Tool Result"
FLUSH_BEFORE_COMPACT_S = 2.0
PER_AGENT = ("last_prompt_tokens", "last_completion_tokens", "last_total_tokens",
             "last_real_prompt_tokens",
             "threshold_tokens", "context_length", "compression_count", "threshold_percent",
             "protect_first_n", "protect_last_n", "_key", "_session_id", "model")


class TencentDBOffloadEngine(ContextEngine):
    def __init__(self, runtime: Any) -> None:
        self.runtime = runtime
        s = runtime.settings
        self.threshold_percent = s.threshold
        self.protect_first_n = s.keep_first
        self.protect_last_n = 6
        self.last_prompt_tokens = 0
        self.last_completion_tokens = 0
        self.last_total_tokens = 0
        self.last_real_prompt_tokens = 0     # the host logs it when preflight is deferred
        self.threshold_tokens = 0
        self.context_length = 0
        self.compression_count = 0
        self.model = ""
        self._key = "default"
        self._session_id = ""
        self._last_compress_aborted = False
        self._last_compression_made_progress = False

    @property
    def name(self) -> str:
        return NAME

    def __deepcopy__(self, memo: Dict[int, Any]) -> "TencentDBOffloadEngine":
        twin = self.__class__.__new__(self.__class__)
        memo[id(self)] = twin
        twin.runtime = self.runtime                 # shared, never copied
        for attr in PER_AGENT:
            setattr(twin, attr, getattr(self, attr, None))
        twin._last_compress_aborted = False
        twin._last_compression_made_progress = False
        return twin

    # -- host lifecycle -----------------------------------------------------------------
    def update_model(self, model: str = "", context_length: int = 0, base_url: str = "",
                     api_key: Any = "", provider: str = "", api_mode: str = "", **_: Any) -> None:
        self.model = model or self.model
        if isinstance(context_length, int) and context_length > 0:
            self.context_length = context_length
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
        worker = self.runtime.worker
        if worker is not None:
            worker.kick(self._key)

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
        if not isinstance(usage, dict):
            return
        prompt = usage.get("prompt_tokens", usage.get("input_tokens"))
        if isinstance(prompt, int) and prompt > 0:
            self.last_prompt_tokens = prompt
            self.last_real_prompt_tokens = prompt
            state = self._state()
            state.last_usage = prompt
            if state.request_estimate:
                state.calibrator.observe(state.request_estimate, prompt)
                state.request_estimate = 0
        completion = usage.get("completion_tokens", usage.get("output_tokens"))
        if isinstance(completion, int) and completion >= 0:
            self.last_completion_tokens = completion
        total = usage.get("total_tokens")
        if isinstance(total, int) and total >= 0:
            self.last_total_tokens = total

    def should_compress(self, prompt_tokens: Optional[int] = None, **_: Any) -> bool:
        if not self.runtime.settings.enabled or self.threshold_tokens <= 0:
            return False
        tokens = self.last_prompt_tokens if prompt_tokens is None else prompt_tokens
        if not isinstance(tokens, (int, float)) or tokens < 0:
            return False          # -1: unknown until real usage arrives after a compaction
        return tokens >= self.threshold_tokens

    def should_defer_preflight_to_real_usage(self, rough_tokens: int = 0, **_: Any) -> bool:
        # After a compaction our own target check already holds; wait for real usage.
        return self.last_prompt_tokens == -1

    def has_content_to_compress(self, messages: Any = None, **_: Any) -> bool:
        return isinstance(messages, list) and len(messages) > 1

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
                return [_fresh(m) for m in plain.messages]
        except Exception as exc:
            self.runtime.note_error("plain local compaction failed too (%s); messages kept" % exc)
        return messages

    def _target(self) -> int:
        ctx = self.context_length or 128_000
        return int(ctx * self.runtime.settings.compact_ratio)

    def _compress(self, messages: List[Dict[str, Any]], current_tokens: Any,
                  force: bool) -> List[Dict[str, Any]]:
        rt = self.runtime
        state = self._state()
        started = time.monotonic()
        count = TokenMemo()
        target = self._target()
        overhead = state.overhead_estimate or rt.last_overhead_estimate
        if isinstance(current_tokens, int) and current_tokens > 0 and not state.calibrator.points:
            # no calibration yet: the host's real count of (about) this list is the best anchor
            state.calibrator.observe(overhead + sum(map(count, messages)), current_tokens)
        budget = max(256, state.calibrator.to_estimate(target) - overhead)
        before_est = sum(map(count, messages))
        before_real = state.calibrator.to_real(overhead + before_est)
        if isinstance(current_tokens, int) and current_tokens > 0:
            before_real = max(before_real, current_tokens) if not force else before_real

        clean: List[Dict[str, Any]] = []
        canvas_removed = 0
        for m in messages:
            fixed, n = M.strip_canvas_from(m) if isinstance(m, dict) else (m, 0)
            canvas_removed += n
            if fixed is not None:
                clean.append(fixed)
        result: Optional[List[Dict[str, Any]]] = None
        level, path, report, error = "", "local", {}, ""
        archived_extra: List[Dict[str, Any]] = []

        if rt.client is not None and rt.client.available:
            try:
                rt.flush(state.key, FLUSH_BEFORE_COMPACT_S)      # ingest before compact
                outcome = self._via_gateway(state, clean, target, overhead, count)
                result, level, report = outcome.messages, outcome.level, outcome.report
                archived_extra = outcome.body_trimmed
                if outcome.canvas:
                    self._adopt_canvas(state, outcome.canvas)
                path = "gateway"
                if not _keeps_current_turn(clean, result):
                    error, result = "Gateway reply lost the current turn", None
            except GatewayError as exc:
                error = str(exc)
            except Exception as exc:   # a reply we could not even repair
                error = "Gateway reply unusable: %s" % exc
            if error:
                path = "local"
                rt.note_error("gateway compaction failed, compacting locally: %s" % error)

        # the canvas goes back in after compaction (_with_canvas): leave room for it
        if rt.settings.canvas and state.canvas_text:
            budget = max(256, budget - estimate_text(state.canvas_text) - PER_MESSAGE)
        if result is not None and sum(map(count, result)) > budget:
            finish = local_compact(result, budget, keep_first=rt.settings.keep_first,
                                   trim_chars=rt.settings.trim_chars,
                                   archived_total=state.stats.archived, count=count)
            result, path = finish.messages, "gateway+local"
        if result is None:
            local = local_compact(clean, budget, keep_first=rt.settings.keep_first,
                                  trim_chars=rt.settings.trim_chars,
                                  archived_total=state.stats.archived, count=count)
            result, level = local.messages, "local"

        untouched = {id(m) for m in result}       # input objects kept as they were
        after_est = sum(map(count, result))       # (memo hits: before the fresh copies)
        # Fresh dicts for every message: Hermes 0.17 persists a rotated session by object
        # identity and skips objects it already saw in the old history.
        result = [_fresh(m) for m in result]
        changed = result != [_fresh(m) if isinstance(m, dict) else m for m in messages]
        if not changed:
            return messages
        with_canvas = self._with_canvas(state, result)
        if with_canvas is not result:
            after_est += estimate_text(state.canvas_text)
        result = with_canvas
        gone = [m for m in messages if id(m) not in untouched]
        departed = self._archive_departed(state, gone, result, archived_extra, messages)
        after_real = state.calibrator.to_real(overhead + after_est)
        self.compression_count += 1
        self._last_compression_made_progress = True
        self._record(state, path, level, before_real, after_real, departed, report, error,
                     canvas_removed, time.monotonic() - started)
        return result

    def _via_gateway(self, state, clean, target, overhead, count):
        return GatewayCompactor(self.runtime.client).run(
            state.gateway_id, clean, target_tokens=target,
            context_length=self.context_length or 128_000, calibrator=state.calibrator,
            overhead_estimate=overhead, count=count)

    def _adopt_canvas(self, state, block: str) -> None:
        digest = hashlib.md5(block.encode("utf-8")).hexdigest()
        with state.lock:
            if not state.canvas_hash:
                state.canvas_text, state.canvas_hash = block, digest

    def _with_canvas(self, state, result: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
        """Put the current canvas back once, on the newest real user message."""
        if not (self.runtime.settings.canvas and state.canvas_text):
            return result
        idx = max((i for i, m in enumerate(result) if M.is_real_user(m)), default=-1)
        if idx < 0:
            return result
        msg = result[idx]
        content = msg.get("content")
        if isinstance(content, list):
            new_content: Any = list(content) + [{"type": "text", "text": state.canvas_text}]
        else:
            new_content = ((content or "") + "\n\n" + state.canvas_text).strip()
        out = list(result)
        out[idx] = M.with_content(msg, new_content)
        with state.lock:
            state.injected_canvas_hash = state.canvas_hash
        return out

    def _archive_departed(self, state, before, after, extra, everything) -> int:
        """Archive every message of ``before`` (the inputs not kept as they were) whose content
        left the context, full originals. ``everything`` gives the tool-call arguments."""
        rt = self.runtime
        if not before and not extra:
            return 0
        kept_calls, kept_text = set(), set()
        for m in after:
            if M.is_tool_result(m):
                for tid, text in M.tool_results(m):
                    kept_calls.add((tid, len(text)))
                    if text.startswith(OFFLOADED_MARK):     # the Gateway's summary stands in
                        state.confirmed_ids.add(tid)
            else:
                kept_text.add(_plain_text(m))
        items: List[ArchiveItem] = []
        args_by_call: Dict[str, Any] = {}
        for m in everything:
            if isinstance(m, dict) and M.role(m) == "assistant":
                args_by_call.update(M.call_args(m))
        departed = 0
        for m in before:
            if not isinstance(m, dict):
                continue
            if M.is_tool_result(m):
                for tid, text in M.tool_results(m):
                    if (tid, len(text)) in kept_calls:
                        continue
                    departed += 1
                    state.deleted_ids.add(tid)
                    if tid not in state.processed_ids:   # the hook archived those in full
                        name, args = args_by_call.get(tid, ("", ""))
                        items.append(ArchiveItem("tool_result", text, tid, name, "tool", args))
            else:
                text = _plain_text(m)
                if text and text not in kept_text and not text.startswith(M.NOTICE_MARK):
                    departed += 1
                    items.append(ArchiveItem("message", text, role=M.role(m)))
        for m in extra:
            for tid, text in M.tool_results(m):
                if tid not in state.processed_ids:
                    name, args = args_by_call.get(tid, ("", ""))
                    items.append(ArchiveItem("tool_result", text, tid, name, "tool", args))
        if items:
            rt.writer.submit(Store.op_archive(state.key, items, rt.now()))
        return departed

    def _record(self, state, path, level, before, after, departed, report, error,
                canvas_removed, seconds) -> None:
        rt = self.runtime
        for stats in (state.stats, rt.registry.totals):
            stats.compactions += 1
            if path.startswith("gateway"):
                stats.gateway_compactions += 1
            else:
                stats.local_compactions += 1
            stats.tokens_before += before
            stats.tokens_after += after
            stats.archived += departed
            stats.levels[level] += 1
            stats.last_level = level
            stats.canvas_blocks_removed += canvas_removed
            if error:
                stats.last_error = error
        event = {"path": path, "level": level, "tokens_before": before, "tokens_after": after,
                 "archived": departed, "report": report, "error": error,
                 "ms": round(seconds * 1000, 1), "context_length": self.context_length}
        rt.writer.submit(Store.op_event(state.key, "compaction", event, rt.now()))
        log.info("tencentdb-offload: compacted %s via %s (%s): %d -> %d tokens",
                 state.key, path, level, before, after)

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
            "session": state.key,
            "gateway_session": state.gateway_id,
            "target_tokens": self._target(),
            "session_stats": state.stats.as_dict(),
            "calibration": state.calibrator.snapshot(),
            "tool_results": {"recorded": len(state.processed_ids),
                             "summarised_by_gateway": len(state.confirmed_ids),
                             "removed_from_context": len(state.deleted_ids)},
            "runtime": self.runtime.status(),
        }


def _plain_text(m: Dict[str, Any]) -> str:
    """A message's text; the content string itself when it is one (the usual case)."""
    content = m.get("content")
    if isinstance(content, str) and not m.get("tool_calls"):
        return content
    return M.text_of(m)


def _fresh(m: Dict[str, Any]) -> Dict[str, Any]:
    """A new dict without host/Gateway ``_`` markers (``_db_persisted`` included)."""
    return {k: v for k, v in m.items() if not k.startswith("_")}


def _keeps_current_turn(before: List[Dict[str, Any]], after: List[Dict[str, Any]]) -> bool:
    """The newest real user message must survive a Gateway compaction."""
    last = next((M.text_of(m) for m in reversed(before) if M.is_real_user(m)), None)
    if last is None:
        return bool(after)
    head = last[:200]
    return any(M.is_real_user(m) and head in M.text_of(m) for m in after)
