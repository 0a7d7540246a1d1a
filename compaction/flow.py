"""One ``compress()`` call in named steps: size the budget, get a Gateway result (ready,
briefly waited for, or asked now), finish locally to the budget, then publish — unless the host
cancelled this attempt, in which case nothing durable is written.

The engine decides *whether* to compact; this module decides *how*, and returns the new list
plus the typed record of what happened. The archive, the Gateway and the clock are the
process's (``process_view.py``); message surgery is ``context``'s, under the process's seal.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

from . import durable
from .ahead import Aim, GatewayAttempt
from .process_view import CompactionProcess
from ..session.record import MAX_LEFT, Compaction, Level, Route
from .engine_view import CompactingEngine
from ..session.state import SessionState
from ..hermes.host import running_host
from ..settings.thresholds import unread_kept_whole
from ..context import canvas, departures, focus
from ..context import gateway_cuts, result_keys
from ..context import digest
from ..context.messages import fresh, is_tool_result, repair, role, tool_results
from ..context.fallback import Budget
from ..context.notes import MEMORY_CHARS, Notes, carried, clean_peer, place
from ..context.tokens import PER_MESSAGE, TokenMemo, estimate_text
from ..common.peer_text import plugin_logger

Message = Dict[str, Any]
log = plugin_logger("tencentdb_offload.compaction")
# A host that pools compression runs compress() on a 4-worker pool shared by every agent of the
# process and refuses compactions while all are busy: there we wait this long for the Gateway.
POOL_GATEWAY_WAIT_S = 0.5
ARCHIVE_BEFORE_RETURN_S = 2.0  # what leaves mid-turn is on disk before the next request
FORCED_FLOOR = 2_048            # a forced compaction never aims below this many tokens
# What the model asked to read back this turn may keep a landing over the target, up to this
# share of the trigger (estimates err, and the answer still follows): trimmed, a read-back
# would only point to itself.
CEILING_SHARE = 0.9
SAID = ("role", "content", "tool_calls", "tool_call_id")   # what makes a message the same to the model


def plan_budget(state: SessionState, messages: List[Message], current_tokens: Any, target: int,
                fallback_overhead: int, count: TokenMemo, force: bool) -> Budget:
    """The budget of a compaction of ``messages`` to ``target`` provider tokens: the overhead
    outside the list (this conversation's estimate, else ``fallback_overhead``), what the
    list may hold, and the request's size before (the host's count, ``current_tokens``,
    anchors a calibration not yet made)."""
    overhead = state.overhead_estimate or fallback_overhead
    listed = sum(map(count, messages))
    host_count = current_tokens if isinstance(current_tokens, int) and current_tokens > 0 else 0
    if host_count and not state.calibrator.points and \
            not state.calibrator.plausible_anchor((overhead or 0) + listed, host_count):
        host_count = 0      # (a host's preflight in a fresh process counts chars / 4)
    if host_count and not state.calibrator.points:
        # no calibration yet: the host's count of (about) this list is the best anchor; what
        # it counts beyond the messages is system prompt + tool schemas
        overhead = overhead or max(0, host_count - listed)
        state.calibrator.observe(overhead + listed, host_count)
    elif host_count and not overhead and not state.last_usage:
        # calibration handed over by an earlier process, nothing sent or answered in this one
        # yet (a host may compact at turn start before its first request): the same anchor,
        # calibrated (later counts may predate a compaction: they are not used so)
        overhead = max(0, state.calibrator.to_estimate(host_count) - listed)
    before = state.calibrator.to_real(overhead + listed)
    if host_count and not force:
        before = max(before, host_count)
    return Budget(max(256, state.calibrator.to_estimate(target) - overhead), overhead=overhead,
                  target=target, before=before)


class CompactionRun:
    """One attempt; ``cancelled`` is the host's check for *this* attempt (a host that pools
    compression installs it on the engine before calling compress, and a later attempt replaces
    it: capture it first)."""

    def __init__(self, engine: CompactingEngine, messages: List[Message], cancelled: Callable[[], bool],
                 memory_context: Any = "", focus_topic: Any = None, wait_gateway: bool = True,
                 state: Optional[SessionState] = None, target: Optional[int] = None):
        self.engine = engine
        self.rt: CompactionProcess = engine.runtime
        self.target = engine.compaction_target() if target is None else target  # this call's
        self.wait_gateway = wait_gateway                # False: a prepared result, or local now
        self.memory_context = memory_context            # a memory provider's, for the model
        self.memory = ""
        self.focus = focus.terms(focus_topic)           # /compress <focus>
        self.state = state if state is not None else engine.current_state()
        self.state.calibrator.bound(engine.context_length)     # an inherited fit stays physical
        self.messages = messages
        self.cancelled = cancelled
        self.count = TokenMemo()
        self.started = time.monotonic()
        self.listed_reuse: Optional[Set[str]] = None     # reused ids of the list and the store
        self.planned: Optional[Budget] = None
        self.recall_copies: List[str] = []
        self.args_gone: List[Any] = []
        self.left: List[str] = []                       # read-back keys of what left
        self.digest_cap: Optional[int] = None            # set on a landing below the ordinary target
        self.archive_by: Optional[float] = None          # the one archive wait's end (both flushes)
        self.gone: Optional[departures.Departures] = None     # what left, as archived

    def run(self, current_tokens: Any, force: bool) -> Tuple[List[Message], Optional[Compaction]]:
        s = self.rt.settings
        budget = self.planned = self.budget(current_tokens, force)
        clean, canvas_removed, self.recall_copies = self.rt.sealed.without_our_blocks(
            self.messages)
        attempt = self.gateway_step(clean, budget)
        if self.cancelled():
            return self.messages, None
        block = self.state.canvas_text if s.canvas else ""
        shown = estimate_text(block) + PER_MESSAGE if block else 0
        room = max(256, budget.for_messages - shown)
        # the story (the digest) is sized for the ordinary target, even on a deeper landing
        ordinary = self.engine.ordinary_target()
        self.digest_cap = None if ordinary <= self.target else digest.budget_for(
            max(256, self.state.calibrator.to_estimate(ordinary) - budget.overhead - shown))
        def list_room(tokens: int) -> int:     # what a request of ``tokens`` leaves the list
            return self.state.calibrator.to_estimate(tokens) - budget.overhead - shown

        ceiling = list_room(int(self.engine.threshold_tokens * CEILING_SHARE))
        # the provider's text stays well inside the digest's share of this budget
        self.memory = clean_peer(self.memory_context, min(MEMORY_CHARS, digest.budget_for(room)))
        notes = self.notes(clean, attempt)
        # with the messaging gateway's lower landing, the newest step's results the model has
        # not read stay whole up to the ceiling while a step more of their size fits under the
        # trigger: trimmed only to reach the landing, a real model would ask for them again.
        # So too where its trigger sits at the ceiling (the small-window floor): there a
        # mid-turn compaction comes only when the pool refused the turn start's. Elsewhere
        # only the canvas' room is theirs: the per-turn CLI paid more otherwise.
        unread_room = room + shown
        if unread_kept_whole(s, self.engine.context_length, running_host().checks_every_request,
                             self.engine.threshold_tokens):
            unread_room = max(unread_room, ceiling)
        result, route, placed = self.finish(clean, attempt, room, notes, ceiling=ceiling,
                                            unread_room=unread_room,
                                            trigger=list_room(self.engine.threshold_tokens))
        # the last word on shape: a host may send consecutive assistant turns as they are
        # (others merge them), so merge them here, calls unioned
        result = [fresh(m) for m in repair(result)]
        if self.unchanged(result) or all(role(m) == "system" for m in result):
            return self.messages, None      # (nothing but orphans: no conversation to keep)
        if not placed:
            result = self.with_notes(result, notes)
        if block and not running_host().selects_context:      # else it goes in per request
            result = self.rt.sealed.inject_canvas(result, block)
            with self.state.lock:
                self.state.injected_canvas_hash = canvas.digest(block)
        if self.cancelled():                        # a discarded attempt publishes nothing
            return self.messages, None
        archived = self.publish(clean, result, attempt)
        result, lost = durable.only_durable(self, clean, result, ceiling, self.gone)
        after = self.state.calibrator.to_real(budget.overhead + sum(map(self.count, result)))
        record = Compaction(
            route=route, level=attempt.level if route.via_gateway else Level.LOCAL,
            tokens_before=budget.before, tokens_after=after, target=budget.target,
            archived=archived, context_length=self.engine.context_length,
            canvas_removed=canvas_removed, error=self.outage(attempt), at=self.rt.clock.now(),
            trigger=self.engine.threshold_tokens, model_ratio=self.model_ratio(),
            ms=round((time.monotonic() - self.started) * 1000, 1),
            left=tuple([k for k in self.left if k not in lost][:MAX_LEFT]),
            prefix_kept=self.prefix_kept(result, budget.overhead),
            cached_before=self.state.cache.held(s.cache_ttl_s, self.rt.clock.now(),
                                                self.rt.clock.monotonic()))
        return result, record

    def prefix_kept(self, result: List[Message], overhead: int) -> int:
        """Provider tokens (ours, calibrated) at the start of the next request that are the
        last one's: what is outside the list (system prompt, tool schemas), then the leading
        messages the compaction left as they were. The cache reads them; the rest is written."""
        same = 0
        for old, new in zip(self.messages, result):     # what the model reads, host keys aside
            if not (isinstance(old, dict) and isinstance(new, dict)
                    and all(old.get(k) == new.get(k) for k in SAID)):
                break
            same += 1
        return self.state.calibrator.to_real(overhead + sum(map(self.count, result[:same])))

    # -- steps ------------------------------------------------------------------------
    def budget(self, current_tokens: Any, force: bool) -> Budget:
        """Our target; a user who asks explicitly (``/compress``, ``force``) while the context
        is already under it gets half of what is there: they asked for a smaller context."""
        overhead = self.rt.last_overhead_estimate
        budget = plan_budget(self.state, self.messages, current_tokens, self.target, overhead,
                             self.count, force)
        if force and budget.before <= budget.target:
            budget = plan_budget(self.state, self.messages, current_tokens,
                                 max(FORCED_FLOOR, budget.before // 2), overhead, self.count, force)
        return budget

    def gateway_step(self, clean: List[Message], budget: Budget) -> GatewayAttempt:
        """A Gateway result for ``clean``: one prepared ahead, or one asked for now (on a
        pooled host only as long as ``POOL_GATEWAY_WAIT_S``); without ``wait_gateway`` (an idle
        turn start, a request cut) only a prepared one, else the local compaction at once."""
        gateway, aim = self.rt.gateway, Aim.of(self.target, self.engine.context_length)
        if gateway.local_only:                      # local mode: nothing went wrong
            return GatewayAttempt(None)
        if not gateway.available:
            return GatewayAttempt.failed("Gateway unavailable")
        ready = gateway.prepared.take(self.state, clean, 0.0)       # (a failed one says why)
        if (ready is not None and ready.messages is not None) or not self.wait_gateway:
            return ready or GatewayAttempt(None)
        if not running_host().pools_compression:     # no pool to starve: ask and wait
            return gateway.attempt(self.state, clean, aim, budget.overhead, self.count)
        gateway.prepared.start(self.state, clean, aim, budget.overhead, self.count)
        return gateway.prepared.take(self.state, clean, POOL_GATEWAY_WAIT_S, True) or GatewayAttempt.failed(
            "Gateway compaction not ready within %.1f s (the host's compression pool is "
            "shared); compacted locally" % POOL_GATEWAY_WAIT_S)

    def model_ratio(self) -> float:
        """The ``compression.model_thresholds`` value the trigger came from (0.0: none), so an
        out-of-process status shows the trigger the engine had, not THRESHOLD's."""
        ratio = getattr(self.engine, "threshold_percent", None)
        return ratio if isinstance(ratio, float) and ratio != self.rt.settings.threshold else 0.0

    def outage(self, attempt: GatewayAttempt) -> str:
        """Why the Gateway was not used, when that is news: with none configured and none ever
        answering at the default URL, compacting locally is the expected mode, not an error."""
        return attempt.error if self.rt.gateway.relied_on else ""

    def notes(self, clean: List[Message], attempt: GatewayAttempt) -> Notes:
        """The provider's text, and the focus-matched items the Gateway's result archived."""
        gone = () if attempt.messages is None else self.rt.sealed.focus_archived(
            clean, attempt.messages, self.focus)
        return Notes(self.memory, " ".join(self.focus), gone)

    def with_notes(self, result: List[Message], notes: Notes) -> List[Message]:
        """``result`` with one note pair at its end, unless it already holds the provider's
        text (and no focus line is due)."""
        if notes.memory and carried(notes.memory, result):
            notes = notes.without_memory()
        if not notes:
            return result
        return place(result, self.rt.sealed.note_pair(result, notes))

    def finish(self, clean: List[Message], attempt: GatewayAttempt, room: int,
               notes: Notes = Notes(), ceiling: int = 0, unread_room: int = 0,
               trigger: int = 0) -> Tuple[List[Message], Route, bool]:
        """The Gateway's list when it fits ``room`` and lands at least as deep as the local
        plan, else a local compaction to ``room`` (of the Gateway's list when that lands as
        deep, else of ours); a recall read of this turn may take up to
        ``ceiling``, the newest step's unread results ``unread_room`` under ``trigger`` (as
        ``local_compact`` takes them)."""
        s, rt, sealed = self.rt.settings, self.rt, self.rt.sealed
        # only what the archive really holds is promised: trim harder, fewer leave otherwise
        recallable = rt.archive.settled(0.2)
        with self.state.lock:
            summaries = dict(self.state.summaries)      # the Gateway's L1, for the digest
        common = dict(keep_first=s.keep_first, reused=self.reused(clean),
                      trim_chars=s.trim_chars if recallable else min(s.trim_chars, 600),
                      recallable=recallable, count=self.count,
                      summaries=summaries, notes=notes, focus=self.focus,
                      digest_cap=self.digest_cap)
        note_cost = digest.tokens_of("\n".join(notes.lines())) if notes else 0
        common.update((key, max(0, value - note_cost)) for key, value in
                      (("ceiling", ceiling), ("unread_room", unread_room), ("trigger", trigger)))
        # what the model asked to read back this turn stays whole, whatever the Gateway cut
        replied = None if attempt.messages is None else gateway_cuts.keyed(
            clean, sealed.keep_read_backs(clean, attempt.messages), common["reused"])
        # the note pair may follow the result (``with_notes``): its room is kept free
        local_room = max(256, room - note_cost)
        ours = sealed.local_compact(clean, local_room, **common)      # the local plan
        if replied is None:
            done, route = ours, Route.LOCAL
        else:
            # the Gateway's reply only where it lands at least as deep as the local plan: a
            # higher landing is read by every later request and leaves less room before the
            # next rewrite (issue 55: 1.06x the cost without a Gateway). Its canvas and L1
            # summaries are kept either way (``Runtime.gateway_attempt``, ``summaries``).
            as_sent = sum(map(self.count, repair(replied))) + note_cost
            deeper = ours.tokens_before > local_room and as_sent > ours.tokens_after + (
                0 if ours.notes_placed else note_cost)      # (under the room: nothing to gain)
            if as_sent <= room and not deeper:
                return replied, Route.GATEWAY, False
            # else finished locally from its reply, as deep as the local plan, when that
            # gets there (its offloaded results stay as it wrote them); else ours
            done, route = ours, Route.LOCAL
            theirs = sealed.local_compact(replied, max(256, min(local_room, ours.tokens_after)),
                                          **common)
            if theirs.tokens_after <= ours.tokens_after:
                done, route = theirs, Route.GATEWAY_THEN_LOCAL
        if not done.within_budget and self.digest_cap is None:     # a deep landing may not get there
            rt.note_error(self.why_over(done.tokens_after, local_room), self.state.key)
        self.args_gone = list(done.departed) + (sealed.merged_only(   # (args: trimmed ones)
            clean, replied, done.messages) if route is Route.GATEWAY_THEN_LOCAL else [])
        return done.messages, route, done.notes_placed

    def why_over(self, landed: int, room: int) -> str:
        plan = self.planned
        if plan is not None and plan.for_messages <= 256:
            return ("compaction landed over its target: the system prompt and tool schemas "
                    "(~%d tokens) alone take the %d-token target; raise COMPACT_RATIO or "
                    "shorten them" % (self.state.calibrator.to_real(plan.overhead), plan.target))
        return ("compaction landed at %d of %d estimated tokens: the current user message and "
                "its newest step are never cut and alone exceed it" % (landed, room))

    def reused(self, clean: List[Message]) -> Set[str]:
        """Call ids the provider reused (each text is then shown by its own key): seen with
        several texts by this process's hook or departures, in ``clean``, or in the archive
        (an earlier process archived another text under the id: a per-turn CLI's case)."""
        if self.listed_reuse is None:    # ``clean`` is the run's one list: read it once
            self.listed_reuse = result_keys.reused_in(clean)
            try:
                self.listed_reuse |= self.rt.archive.reused_ids(self.state.key, {
                    tid for m in clean if is_tool_result(m) for tid, _t in tool_results(m)})
            except Exception:   # unreadable: this process's knowledge stands (said once)
                self.rt.note_fault("reading the archive's reused call ids failed", self.state.key)
        with self.state.lock:       # (archive_departures may add some during the run)
            return set(self.state.reused_ids) | self.listed_reuse

    def unchanged(self, result: List[Message]) -> bool:
        # Fresh dicts returned: a host that rotates the session id persists it by object identity.
        return len(result) == len(self.messages) and result == [
            fresh(m) if isinstance(m, dict) else m for m in self.messages]

    def publish(self, clean: List[Message], result: List[Message],
                attempt: GatewayAttempt) -> int:
        """Archive what left (on disk before the next request, bounded) and count it."""
        gone = self.rt.sealed.what_left(clean, result, attempt.cut)
        # a recall copy is identical to the one kept: archived once, nothing is ever only here
        extra = [departures.Departed("message", b, role="user") for b in self.recall_copies[:1]]
        if extra or self.args_gone:
            gone = departures.Departures(gone.items + extra + self.args_gone, gone.left_ids,
                                         gone.summarised_ids, gone.count)
        self.rt.archive.record_departures(self.state, gone)
        self.gone = gone
        self.left = departures.read_keys(durable.without_digests(gone, self.rt.sealed),
                                         self.reused(clean))
        if gone.items:
            self.rt.archive.flush(self.archive_wait())
        return gone.count

    def archive_wait(self) -> float:
        """What is left of the one wait for the archive a compaction allows: a write stuck on
        another process's lock made each of the two flushes wait it in full."""
        if self.archive_by is None:
            self.archive_by = time.monotonic() + ARCHIVE_BEFORE_RETURN_S
        return max(0.0, self.archive_by - time.monotonic())


def attempt_cancelled(engine: CompactingEngine) -> Callable[[], bool]:
    """This attempt's cancellation check, captured at entry (a later attempt replaces the
    attribute; a host that pools compression installs it before calling compress)."""
    check = getattr(engine, "_compression_cancelled_check", None)

    def cancelled() -> bool:
        try:
            return bool(check()) if callable(check) else False
        except Exception:
            return False
    return cancelled


def plain_local(engine: CompactingEngine, messages: List[Any], cancelled: Callable[[], bool],
                state: Optional[SessionState] = None, target: Optional[int] = None) -> List[Any]:
    """The plain local compaction (under ``target``, default the engine's) when the full flow
    failed, so the host does not loop on us; ``messages`` itself when even that fails or the
    attempt was cancelled."""
    rt = engine.runtime
    try:
        clean = [m for m in messages if isinstance(m, dict)]
        plain = rt.sealed.local_compact(clean, int((target or engine.compaction_target()) * 0.8),
                                        keep_first=rt.settings.keep_first)
        if plain.changed and not cancelled():
            # what leaves stays recallable here too: the flow that failed did not archive it
            gone = rt.sealed.what_left(clean, plain.messages)
            gone = gone._replace(items=gone.items + list(plain.departed))
            state = state or engine.current_state()
            rt.archive.record_departures(state, gone)
            if gone.items:
                rt.archive.flush(ARCHIVE_BEFORE_RETURN_S)
            # and what it says can be read back is in the archive, or says it was not kept
            out, _lost = durable.not_kept(rt, durable.holder(rt, state.key), plain.messages,
                                          durable.named(gone, set(), plain.messages, rt.sealed))
            return [fresh(m) for m in out]
    except Exception as exc:
        log.debug("plain local compaction failed", exc_info=True)
        rt.note_error("plain local compaction failed too (%s); messages kept" % exc,
                      (state or engine.current_state()).key)
    return messages
