"""The tool-call ids a conversation has seen: the newest kept for membership, every one counted.

A conversation of the messaging gateway may live for months: one set of every id it ever
saw grew by ~400 bytes per tool call for as long as the process served it. What the ids are
for (a repeated hook, a result leaving the context) concerns the newest few hundred; a
context never holds ``IDS_KEPT`` results.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Hashable, Iterable, Iterator

IDS_KEPT = 10_000       # per conversation


class SeenIds:
    """The newest ``limit`` ids added (``in``, iteration) and ``count``, the distinct ids ever
    added. Not locked: callers hold their conversation's lock."""

    def __init__(self, limit: int = IDS_KEPT) -> None:
        self.limit = max(1, limit)
        self._ids: "OrderedDict[Hashable, None]" = OrderedDict()
        self.count = 0

    def add(self, item: Hashable) -> None:
        if item in self._ids:
            self._ids.move_to_end(item)
            return
        self.count += 1
        self._ids[item] = None
        if len(self._ids) > self.limit:
            self._ids.popitem(last=False)

    def __ior__(self, items: Iterable[Hashable]) -> "SeenIds":
        for item in items:
            self.add(item)
        return self

    def __contains__(self, item: Any) -> bool:
        return item in self._ids

    def __iter__(self) -> Iterator[Hashable]:
        return iter(list(self._ids))

    def __len__(self) -> int:
        return len(self._ids)


def newest(table: "OrderedDict[Any, Any]", key: Hashable, default: Any, limit: int = IDS_KEPT) -> Any:
    """``table[key]`` (``default`` put there if absent), moved to the newest end; the oldest
    entries beyond ``limit`` are forgotten."""
    value = table.pop(key, default)
    table[key] = value
    while len(table) > limit:
        table.popitem(last=False)
    return value
