"""What a compaction may cost, and the groups of one local compaction: the shared shapes of
``compaction.flow`` (which sizes the budget), ``fallback`` (which plans, fills and assembles)
and ``tightening`` (which makes the must-keep part fit)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Set, Tuple

Message = Dict[str, Any]


@dataclass(frozen=True)
class Budget:
    """What one compaction may cost. The flow sizes it from its target in provider tokens
    (``compaction.flow.plan_budget``); the local compaction prices its groups against it
    (``room``). Tokens are estimated tokens (``tokens``) unless they say provider tokens."""
    for_messages: int       # what the list itself (its system messages too) may take
    overhead: int = 0       # outside the list: system prompt, tool schemas
    target: int = 0         # provider tokens the request must land at or under
    before: int = 0         # provider tokens of the request before
    fixed: int = 0          # spent before any group is chosen: system messages, the
                            # earlier digests, the new digest's share
    ceiling: int = 0        # what the list may never pass (0: ``for_messages``)

    def room(self, must: int) -> int:
        return self.for_messages - self.fixed - must

    @property
    def hard_limit(self) -> int:
        return max(self.for_messages, self.ceiling)

    def hard_room(self, must: int) -> int:
        return self.hard_limit - self.fixed - must


@dataclass
class Plan:
    """The groups of one compaction, in one index space (``spans``)."""
    body: List[Message]
    spans: List[Tuple[int, int]]
    current: int                               # span of the current user message (-1: none)
    digests: List[int]                         # spans that are earlier digests (kept as sent)
    bodies: List[str]                          # their digest texts
    head: List[int] = field(default_factory=list)
    must: Set[int] = field(default_factory=set)
    versions: Dict[int, List[Message]] = field(default_factory=dict)
    cost: Dict[int, int] = field(default_factory=dict)
    args_cut: Dict[int, List[Tuple[str, str, str]]] = field(default_factory=dict)
    removed: List[Message] = field(default_factory=list)     # heartbeats: they leave first
    asked_back: Set[str] = field(default_factory=set)        # the current turn's recall reads
    unread: Set[str] = field(default_factory=set)            # the newest step's, not yet read
    reused: Set[str] = field(default_factory=set)            # call ids with several texts

    @property
    def whole_over_budget(self) -> Set[str]:
        """Results trimmed only past the hard limit, not the budget: what the model asked for
        in this turn and has not read (trimmed, it reads them again and pays twice)."""
        return self.asked_back | self.unread

    def messages(self, i: int) -> List[Message]:
        s, e = self.spans[i]
        return self.body[s:e]

    def must_cost(self) -> int:
        return sum(self.cost[i] for i in self.must)
