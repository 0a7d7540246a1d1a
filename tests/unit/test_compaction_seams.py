"""Compaction runs on its own seams: an archive, a Gateway session and a clock made by hand,
and no runtime. The fakes offer exactly what ``compaction/process_view.py`` names (slots, no
other attribute): a step that reached for a runtime's store, writer, client or seal would fail,
or be noted as an error, and every test here checks that no error was noted."""

from typing import Any, Dict, List, Set, Tuple

from tencentdb_offload.compaction.ahead import GatewayAttempt, PreparedCompactions
from tencentdb_offload.compaction.flow import CompactionRun
from tencentdb_offload.context.departures import Departures, read_keys
from tencentdb_offload.context.messages import tool_results, validation_errors
from tencentdb_offload.context.provenance import Seal
from tencentdb_offload.context.sealed import SealedWork
from tencentdb_offload.context.tokens import messages_tokens
from tencentdb_offload.session.record import Route
from tencentdb_offload.session.state import SessionRegistry, SessionState
from tencentdb_offload.settings.config import Settings

from helpers import conversation

WINDOW = 64_000


class Archive:
    __slots__ = ("kept", "flushes", "handed_over")

    def __init__(self) -> None:
        self.kept: Set[Tuple[str, str]] = set()
        self.flushes = 0
        self.handed_over: List[Any] = []

    @property
    def last_error(self) -> str:
        return ""

    def record_departures(self, state: SessionState, gone: Departures) -> None:
        keys = read_keys(gone) + [d.tool_call_id for d in gone.items if d.tool_call_id]
        self.kept |= {(state.key, k) for k in keys}

    def flush(self, timeout: float) -> bool:
        self.flushes += 1
        return True

    def settled(self, timeout: float) -> bool:
        return True

    def holds(self, conversation: str, key: str) -> bool:
        return (conversation, key) in self.kept

    def reused_ids(self, conversation: str, ids: Any) -> Set[str]:
        return set()

    def leave_for_next_process(self, conversation: str, name: str, value: Any) -> None:
        self.handed_over.append((conversation, name))


class Gateway:
    """No Gateway (``down=None``: local mode), or one that answers every compaction with
    ``down``, its reason for failing."""
    __slots__ = ("down", "asked", "prepared")

    def __init__(self, down: Any = None) -> None:
        self.down, self.asked = down, 0
        self.prepared = PreparedCompactions(self.attempt)

    @property
    def local_only(self) -> bool:
        return self.down is None

    @property
    def available(self) -> bool:
        return self.down is not None

    @property
    def relied_on(self) -> bool:
        return self.down is not None

    def attempt(self, state: SessionState, clean: List[Dict[str, Any]], aim: Any,
                overhead: int, count: Any) -> GatewayAttempt:
        self.asked += 1
        return GatewayAttempt.failed(self.down)


class Clock:
    __slots__ = ()

    def now(self) -> float:
        return 1_700_000_000.0

    def monotonic(self) -> float:
        return 100.0


class Process:
    """What compaction may see of the process it runs in, and nothing else."""
    __slots__ = ("settings", "sealed", "archive", "gateway", "clock", "last_overhead_estimate",
                 "errors")

    def __init__(self, gateway: Gateway) -> None:
        self.settings = Settings(gateway_url="")
        self.sealed = SealedWork(Seal(b"s" * 32))
        self.archive, self.gateway, self.clock = Archive(), gateway, Clock()
        self.last_overhead_estimate = 0
        self.errors: List[str] = []

    def note_error(self, message: str, conversation: str = "") -> None:
        self.errors.append(message)

    def note_fault(self, what: str, conversation: str = "") -> None:
        self.errors.append(what)

    def record_compaction(self, state: SessionState, record: Any) -> None:
        raise AssertionError("a compaction run records nothing itself: the engine does")


class Engine:
    """The engine as compaction sees it (``compaction/engine_view.py``)."""
    __slots__ = ("runtime", "context_length", "threshold_tokens", "state")

    def __init__(self, process: Process) -> None:
        self.runtime, self.context_length = process, WINDOW
        self.threshold_tokens = int(WINDOW * process.settings.threshold)
        self.state = SessionRegistry().get("conversation-1")

    def compaction_target(self, deep: bool = False) -> int:
        return self.ordinary_target()

    def ordinary_target(self) -> int:
        return self.runtime.settings.target_tokens(WINDOW)

    def estimate_real(self, messages: Any) -> int:
        return self.state.calibrator.to_real(messages_tokens(messages))

    def current_state(self) -> SessionState:
        return self.state


def call_ids(messages: List[Dict[str, Any]]) -> Set[str]:
    return {c["id"] for m in messages for c in m.get("tool_calls") or ()}


def results(messages: List[Dict[str, Any]]) -> Dict[str, str]:
    return {tid: text for m in messages for tid, text in tool_results(m)}


def compacted(gateway: Gateway) -> Tuple[Process, List[Dict[str, Any]], List[Dict[str, Any]], Any]:
    process = Process(gateway)
    engine = Engine(process)
    before = conversation(50, 6000)
    assert engine.estimate_real(before) > engine.threshold_tokens     # a compaction is due
    after, record = CompactionRun(engine, before, lambda: False).run(None, False)
    return process, before, after, record


def assert_a_sound_landing(process: Process, before: List[Dict[str, Any]],
                           after: List[Dict[str, Any]], record: Any) -> None:
    assert process.errors == []
    assert record is not None and record.tokens_after <= record.target < record.tokens_before
    assert validation_errors(after) == []
    assert call_ids(after) == set(results(after))       # every call kept with its results
    kept = results(after)
    gone = [tid for tid, text in results(before).items() if kept.get(tid) != text]
    assert gone, "no result left the context whole"
    assert all(process.archive.holds("conversation-1", tid) for tid in gone)   # recallable
    assert process.archive.flushes > 0                  # on disk before the next request


def test_a_local_compaction_with_no_runtime():
    gateway = Gateway()
    process, before, after, record = compacted(gateway)
    assert_a_sound_landing(process, before, after, record)
    assert record.route is Route.LOCAL and record.error == "" and gateway.asked == 0


def test_a_failed_gateway_compaction_falls_over_to_the_local_one_with_no_runtime():
    gateway = Gateway(down="the Gateway refused the compaction")
    process, before, after, record = compacted(gateway)
    assert_a_sound_landing(process, before, after, record)
    assert record.route is Route.LOCAL and "refused" in record.error
    assert gateway.asked <= 1           # (a host that pools compression asks it on a thread)
