"""Numbers as people read them: ``1,234``, ``1 item`` / ``2 items``, ``118K``, ``1.5 MB``."""

from __future__ import annotations

from typing import Any


def count(n: Any) -> str:
    """``1,234`` (thousands separators)."""
    return format(int(n or 0), ",")


def plural(n: Any, word: str, many: str = "") -> str:
    """``1 item``, ``2 items``, ``1,234 items`` (``many`` for irregular plurals)."""
    return "%s %s" % (count(n), word if int(n or 0) == 1 else (many or word + "s"))


def kilo(n: int) -> str:
    """Token counts in a line of text: ``118K`` from 10,000 on, else ``9,876``."""
    return "%.0fK" % (n / 1000) if n >= 10_000 else count(n)


def size(n: int) -> str:
    """Bytes as ``1.5 MB`` / ``12.3 KB``."""
    return "%.1f MB" % (n / 1e6) if n >= 1e6 else "%.1f KB" % (n / 1e3)
