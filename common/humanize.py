"""How things read to a person: numbers (``1,234``, ``1 item``, ``118K``, ``1.5 MB``) and a
peer's text made safe for a terminal."""

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


_CONTROL = {c: None for c in range(32) if c not in (9, 10)}
_CONTROL.update({127: None, **{c: None for c in range(0x80, 0xA0)}})
_CONTROL.update({c: None for c in (0x200E, 0x200F, 0x202A, 0x202B, 0x202C, 0x202D, 0x202E,
                                   0x2066, 0x2067, 0x2068, 0x2069)})   # bidi overrides


def printable(text: Any, limit: int = 0, newlines: bool = True) -> str:
    """Text a peer wrote (a Gateway's level or error, a canvas, a tool name), safe to show a
    person: no terminal control characters (ESC would clear the screen and fake a prompt),
    no bidi overrides; ``newlines=False`` folds line breaks to spaces; ``limit`` caps it."""
    out = str(text if text is not None else "").translate(_CONTROL)
    if not newlines:
        out = out.replace("\n", " ").replace("\t", " ")
    return out[:limit] + "…" if limit and len(out) > limit else out
