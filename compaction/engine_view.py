"""What compaction needs of the engine: its window, its target, the conversation's state and
the process it runs in (``process_view.py``).

A protocol, not the engine class: the engine imports this package, so naming the class here
would make an import circle; ``TencentDBOffloadEngine`` satisfies it.
"""

from __future__ import annotations

from typing import Any, Protocol

from .process_view import CompactionProcess
from ..session.state import SessionState


class CompactingEngine(Protocol):
    context_length: int
    threshold_tokens: int       # the trigger that applies on this window
    runtime: CompactionProcess  # the process's archive, Gateway session and clock

    def compaction_target(self, deep: bool = False) -> int: ...     # deep: an idle landing

    def ordinary_target(self) -> int: ...      # the target the digest is sized for

    def estimate_real(self, messages: Any) -> int: ...      # provider tokens of a request of them

    def current_state(self) -> SessionState: ...
