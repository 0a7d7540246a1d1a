"""Gateway compactions prepared ahead of need, so ``compress()`` holds the host briefly.

A host that pools compression runs ``compress()`` on a 4-worker pool shared by every agent of
the process and refuses new compactions while all four are busy ("Context compression pool saturated"); the
request then goes out uncompacted. A Gateway ``/compact`` takes seconds. So from the warm-up
point a background thread asks the Gateway to compact a snapshot of the conversation, and
``compress()`` applies the ready result when the snapshot is still a prefix of the list it is
given (the messages that came since follow unchanged), or waits briefly for one in flight.
A prepared result lives in memory only: using it, or not, publishes nothing durable.

A turn start after a pause longer than the provider's cache TTL compacts (``idle.py``) and must
not wait for a ``/compact`` that takes seconds. In a process that outlives the turn (the
messaging gateway), the pause is idle time: at a turn's end the conversation is booked
(``PauseBookings``), and once most of the TTL has passed with no newer response, its compaction
is prepared (``PreparedCompactions.start``), so the turn that ends the pause finds it ready. One
thread serves every booking (started when something is booked, gone when nothing is); a
conversation holds at most one booking, the newest; at most ``max_sessions`` are held (the
oldest go first).
"""

from __future__ import annotations

import json
import threading
import time
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from typing import Any, Callable, Deque, Dict, List, Optional, Tuple

from ..session.record import Level
from ..session.state import SessionState

Message = Dict[str, Any]
REFRESH_TAIL_SHARE = 0.25   # a ready result stays usable while what came since is this small
MAX_RUNNING = 2             # threads; the Gateway is the bottleneck: more at once only queue there
IDLE_EXIT_S = 30.0          # the pause thread ends after this long with nothing booked
Booking = Tuple[float, Tuple[Any, ...], Callable[[], bool]]    # (due, start's arguments, still wanted)


@dataclass(frozen=True)
class GatewayAttempt:
    """What asking the Gateway gave: its list (None if it failed), level, report, the results
    cut before sending (archived with the rest), and why it failed."""
    messages: Optional[List[Message]]
    level: Level = Level.UNKNOWN
    report: Dict[str, Any] = field(default_factory=dict)
    cut: List[Message] = field(default_factory=list)
    error: str = ""

    @classmethod
    def failed(cls, why: str) -> "GatewayAttempt":
        return cls(None, error=why)


def content_key(m: Any) -> str:
    """What makes two messages the same message (host bookkeeping keys aside)."""
    if not isinstance(m, dict):
        return repr(m)
    return json.dumps([m.get("role"), m.get("content"), m.get("tool_calls"),
                       m.get("tool_call_id")], sort_keys=True, default=str, ensure_ascii=False)


@dataclass(frozen=True)
class Aim:
    """What a Gateway compaction is asked for, fixed when it is asked: a pool thread never reads
    the live engine (another call on it may land deeper, its window may change meanwhile)."""
    target: int
    context_length: int

    @classmethod
    def of(cls, target: int, context_length: int) -> "Aim":
        return cls(target, context_length or 128_000)     # (a window not known yet)


@dataclass
class _Job:
    keys: List[str]
    done: threading.Event = field(default_factory=threading.Event)
    attempt: Optional[GatewayAttempt] = None
    started: float = field(default_factory=time.monotonic)
    sent: bool = False              # taken off the queue by a pool thread


class PauseBookings:
    """Preparations booked for after a pause: each started when due, if still wanted then."""

    def __init__(self, start: Callable[..., bool], most: int,
                 on_error: Callable[[str], None] = lambda _what: None) -> None:
        self._start = start
        self._on_error = on_error       # in an except block: the error is said once
        self._most = max(1, most)
        self._booked: "OrderedDict[str, Booking]" = OrderedDict()
        self._cond = threading.Condition()
        self._thread = None
        self._closed = False
        self.fired = 0          # preparations started after a pause

    @property
    def waiting(self) -> int:
        with self._cond:
            return len(self._booked)

    def book(self, key: str, delay_s: float, args: Tuple[Any, ...],
             still_wanted: Callable[[], bool]) -> None:
        """Prepare with ``args`` in ``delay_s`` seconds if ``still_wanted()`` says so then."""
        with self._cond:
            if self._closed:
                return
            self._booked.pop(key, None)
            self._booked[key] = (time.monotonic() + max(0.0, delay_s), args, still_wanted)
            while len(self._booked) > self._most:
                self._booked.popitem(last=False)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="tdo-compact-after-pause",
                                                daemon=True)
                self._thread.start()
            self._cond.notify()

    def cancel(self, key: str) -> None:
        with self._cond:
            self._booked.pop(key, None)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._booked.clear()
            self._cond.notify()

    def _due(self) -> Any:
        """The next booking that is due, waiting for it; None when the thread should end."""
        with self._cond:
            idle_since = time.monotonic()
            while not self._closed:
                now = time.monotonic()
                if not self._booked:
                    if now - idle_since >= IDLE_EXIT_S:
                        self._thread = None
                        return None
                    self._cond.wait(IDLE_EXIT_S - (now - idle_since))
                    continue
                key, (due, args, wanted) = min(self._booked.items(), key=lambda kv: kv[1][0])
                if due <= now:
                    del self._booked[key]
                    return args, wanted
                self._cond.wait(due - now)
            return None

    def _run(self) -> None:
        for args, wanted in iter(self._due, None):
            try:
                if wanted() and self._start(*args):
                    with self._cond:
                        self.fired += 1
            except Exception:       # a failure of ours: said, never kills the thread
                self._on_error("a compaction booked for after a pause failed to start")


class PreparedCompactions:
    """Per conversation at most one prepared (or preparing) Gateway compaction, run by a
    pool of at most ``MAX_RUNNING`` threads (started when there is work, gone when idle):
    100 conversations queue, they do not each get a thread. A queued job that no longer
    matters (dropped for a newer conversation, or the runtime closed) is never sent."""

    def __init__(self, ask: Callable[..., GatewayAttempt], max_sessions: int = 20,
                 on_error: Callable[..., None] = lambda _what, _whose="": None) -> None:
        self._ask = ask                     # runtime.gateway_attempt
        self._on_error = on_error           # runtime.note_fault: in an except block, once each
        self._jobs: "OrderedDict[str, _Job]" = OrderedDict()
        self._lock = threading.Lock()
        self._queue: Deque[Tuple[str, _Job, Tuple[Any, ...]]] = deque()
        self._threads: List[threading.Thread] = []
        self._max = max(1, max_sessions)
        self.closed = False
        self.used = self.started_jobs = self.skipped = 0
        self.after_pause = PauseBookings(self.start, self._max, on_error)   # due after a pause

    def busy(self, key: str) -> bool:
        """No new job for this conversation now (one is running, or the runtime closed):
        callers skip preparing its snapshot (a full pass over the messages)."""
        with self._lock:
            job = self._jobs.get(key)
            return self.closed or (job is not None and not job.done.is_set())

    @staticmethod
    def _still_usable(job: _Job, keys: List[str], tail_tokens: int, target: int) -> bool:
        return (len(job.keys) <= len(keys) and keys[:len(job.keys)] == job.keys
                and job.attempt is not None and job.attempt.messages is not None
                and tail_tokens <= target * REFRESH_TAIL_SHARE)

    def start(self, state: SessionState, clean: List[Message], aim: Aim, overhead: int,
              count: Callable[[Any], int]) -> bool:
        """Prepare a compaction of ``clean`` unless a usable one exists or is under way."""
        if self.busy(state.key):
            return False
        keys = [content_key(m) for m in clean]
        with self._lock:
            job = self._jobs.get(state.key)
            if self.closed or (job is not None and not job.done.is_set()):
                return False
            if job is not None and self._still_usable(job, keys, _tail(clean, job, count),
                                                      aim.target):
                return False
            job = _Job(keys)
            self._jobs[state.key] = job
            self._jobs.move_to_end(state.key)
            while len(self._jobs) > self._max:
                _key, dropped = self._jobs.popitem(last=False)
                dropped.done.set()          # whoever waits on it stops waiting
            self.started_jobs += 1
            self._queue.append((state.key, job, (state, list(clean), aim, overhead)))
            self._threads = [t for t in self._threads if t.is_alive()]
            if len(self._threads) < MAX_RUNNING:
                worker = threading.Thread(target=self._work, name="tdo-compact-ahead", daemon=True)
                self._threads.append(worker)
                worker.start()
        return True

    def _next(self) -> Optional[Tuple[_Job, Tuple[Any, ...]]]:
        """The next job that still matters; None when there is nothing to do (the thread ends)."""
        with self._lock:
            while self._queue and not self.closed:
                key, job, args = self._queue.popleft()
                if self._jobs.get(key) is job:
                    job.sent = True
                    return job, args
                self.skipped += 1           # dropped or replaced while it waited: not sent
            self._threads = [t for t in self._threads if t is not threading.current_thread()]
            return None

    def _work(self) -> None:
        while True:
            found = self._next()
            if found is None:
                return
            job, (state, snapshot, aim, overhead) = found
            try:
                job.attempt = self._ask(state, snapshot, aim, overhead, None)
            except Exception as exc:        # a failure of ours: said, never kills the thread
                self._on_error("a compaction prepared ahead failed in the plugin", state.key)
                job.attempt = GatewayAttempt.failed("prepared compaction failed: %s" % exc)
            finally:
                job.done.set()

    def take(self, state: SessionState, clean: List[Message], wait_s: float,
             forget: bool = False) -> Optional[GatewayAttempt]:
        """The prepared result applied to ``clean`` (its messages, then what came since), the
        failed attempt (its error), or None when there is none for this list within
        ``wait_s``; with ``forget`` (the caller compacts without it now) a job still queued
        then is dropped, never sent."""
        with self._lock:
            job = self._jobs.get(state.key)
        keys = [content_key(m) for m in clean]
        if job is None or keys[:len(job.keys)] != job.keys:
            return None
        if not job.done.wait(max(0.0, wait_s)):
            if forget:      # its snapshot predates the compaction about to land: nobody's use
                with self._lock:
                    if self._jobs.get(state.key) is job and not job.sent:
                        del self._jobs[state.key]
                        job.done.set()
            return None
        got = job.attempt
        if got is None or got.messages is None:     # failed: why, not "not ready"
            return got
        with self._lock:
            if self._jobs.get(state.key) is job:
                del self._jobs[state.key]   # a result is applied once
                self.used += 1              # counted once: a re-entrant call may wait on it too
        return GatewayAttempt(list(got.messages) + list(clean[len(job.keys):]), got.level,
                              got.report, got.cut, got.error)

    def settle(self, key: str, timeout: float) -> bool:
        """Wait up to ``timeout`` s for this conversation's preparation in flight; True when
        none runs then. The demo's stand-in for the time a real session gives it: the
        model's reply, the user's pause."""
        with self._lock:
            job = self._jobs.get(key)
        return job is None or job.done.wait(max(0.0, timeout))

    def drop(self, key: str) -> None:
        """This conversation ended: its preparation no longer matters (if still queued, it is
        never sent)."""
        self.after_pause.cancel(key)
        with self._lock:
            job = self._jobs.pop(key, None)
        if job is not None:
            job.done.set()

    def status(self) -> Dict[str, int]:
        with self._lock:
            running = sum(1 for j in self._jobs.values() if not j.done.is_set())
            threads = sum(1 for t in self._threads if t.is_alive())
        return {"prepared_started": self.started_jobs, "prepared_used": self.used,
                "prepared_skipped": self.skipped, "preparing": running, "threads": threads,
                "prepared_after_pause": self.after_pause.fired,
                "waiting_for_pause": self.after_pause.waiting}

    def close(self, timeout: float = 2.0) -> None:
        """Drop every job (queued ones are never sent) and join the pool's threads; one in
        the middle of a /compact gets ``timeout`` to finish (it is a daemon after that)."""
        self.after_pause.close()
        with self._lock:
            self.closed = True
            for job in self._jobs.values():
                job.done.set()
            self._jobs.clear()
            self._queue.clear()
            threads, self._threads = list(self._threads), []
        deadline = time.monotonic() + timeout
        for t in threads:
            if t is not threading.current_thread():
                t.join(max(0.0, deadline - time.monotonic()))


def _tail(clean: List[Message], job: _Job, count: Callable[[Any], int]) -> int:
    return sum(count(m) for m in clean[len(job.keys):])
