"""The groups of one local compaction and what it may cost: the shared shapes of
``fallback`` (which plans, fills and assembles) and ``tightening`` (which makes the must-keep
part fit)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Set, Tuple

Message = Dict[str, Any]


@dataclass
class Budget:
    """What the result may cost, and what is spent before any group is chosen."""
    limit: int                     # estimated tokens the whole result may take
    fixed: int                     # system messages, earlier digests, the new digest's share
    digest_cap: int                # tokens all digest sections together may take
    ceiling: int = 0               # what it may never pass (0: ``limit``)

    def room(self, must: int) -> int:
        return self.limit - self.fixed - must

    @property
    def hard_limit(self) -> int:
        return max(self.limit, self.ceiling)

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
