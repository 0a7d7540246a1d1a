"""What compaction needs of the process it runs in: an archive, a Gateway session, a clock.

Protocols, not the runtime's classes: the runtime imports this package, so naming its classes
here would make an import circle, and compaction given fakes of these runs without a runtime
(``tests/unit/test_compaction_seams.py``). ``runtime/process.py`` provides them over its
store, writer and Gateway client, read at each call: a store opened later, a client wired
later and a forked child's reset are seen at once.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, List, Optional, Protocol, Set

from .ahead import Aim, GatewayAttempt, PreparedCompactions
from ..context.departures import Departures
from ..context.sealed import SealedWork
from ..session.record import Compaction
from ..session.state import SessionState
from ..settings.config import Settings

Message = Dict[str, Any]


class Archive(Protocol):
    """Where what leaves the context is kept, and what the next process on a conversation
    reads first."""

    @property
    def last_error(self) -> str: ...       # why the last write failed ("": none did)

    def record_departures(self, state: SessionState, gone: Departures) -> None: ...

    def flush(self, timeout: float) -> bool: ...        # queued writes on disk within timeout

    def settled(self, timeout: float) -> bool: ...      # flushed, and the store takes writes

    def holds(self, conversation: str, key: str) -> bool: ...   # committed, read back

    def reused_ids(self, conversation: str, ids: Iterable[str]) -> Set[str]: ...

    def leave_for_next_process(self, conversation: str, name: str, value: Any) -> None: ...


class GatewaySession(Protocol):
    """The Gateway as compaction asks it: whether there is one, whether it answers now, and
    one compaction asked now or prepared ahead."""

    @property
    def local_only(self) -> bool: ...      # no Gateway at all: compacting locally is no failure

    @property
    def available(self) -> bool: ...

    @property
    def relied_on(self) -> bool: ...       # configured, or it answered: its failure is news

    @property
    def prepared(self) -> PreparedCompactions: ...

    def attempt(self, state: SessionState, clean: List[Message], aim: Aim, overhead: int,
                count: Optional[Callable[[Any], int]]) -> GatewayAttempt: ...   # never raises


class Clock(Protocol):
    def now(self) -> float: ...            # wall time a stepped system clock does not move

    def monotonic(self) -> float: ...


class CompactionProcess(Protocol):
    """The runtime as compaction sees it (``runtime/process.Runtime`` is one)."""
    settings: Settings
    sealed: SealedWork           # the installation's seal, bound once
    archive: Archive
    gateway: GatewaySession
    clock: Clock
    last_overhead_estimate: int  # of the last request any engine of the process measured

    def note_error(self, message: str, conversation: str = "") -> None: ...

    def note_fault(self, what: str, conversation: str = "") -> None: ...    # said once each

    def record_compaction(self, state: SessionState, record: Compaction) -> None: ...
