"""Which text the plugin itself wrote: a keyed seal on every block and notice it makes.

A user can type our tags or our notice prefix, and a Gateway can return text shaped like our
blocks; neither can produce a seal, because a seal is an HMAC of the exact text under a key
that only this installation holds (``archive/seal_key.py`` keeps it in the store directory).
Recognition is "the seal verifies over the whole text", never a prefix or a substring, so
the user's words always survive. Pure: the runtime reads or creates the key and hands it in.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
from typing import Optional, Tuple

KINDS = ("canvas", "notice", "digest", "trim", "summary")
_TAG_LEN = 20                                   # hex chars: 80 bits, not guessable
_LINE_RE = re.compile(r"\n?\[tdo-seal (%s) ([0-9a-f]{%d})\]\Z" % ("|".join(KINDS), _TAG_LEN))


class Seal:
    """Signs and checks the plugin's own text under one installation key."""

    def __init__(self, key: bytes) -> None:
        if not isinstance(key, (bytes, bytearray)) or len(key) < 16:
            raise ValueError("a seal key needs at least 16 bytes")
        self._key = bytes(key)

    @classmethod
    def ephemeral(cls) -> "Seal":
        """A key for this process only (no store): earlier processes' text reads as foreign,
        which keeps it (never strips a user's words) at the cost of not deduplicating it."""
        return cls(os.urandom(32))

    def tag(self, kind: str, body: str) -> str:
        if kind not in KINDS:
            raise ValueError("unknown seal kind %r" % kind)
        data = ("%s\0%s" % (kind, body)).encode("utf-8", "surrogatepass")
        return hmac.new(self._key, data, hashlib.sha256).hexdigest()[:_TAG_LEN]

    def check(self, kind: str, body: str, tag: str) -> bool:
        return isinstance(tag, str) and hmac.compare_digest(self.tag(kind, body), tag)

    # -- the trailing-line shape, for notices and other whole messages --------------------
    def seal_text(self, kind: str, body: str) -> str:
        """``body`` followed by one seal line covering all of it."""
        return "%s\n[tdo-seal %s %s]" % (body, kind, self.tag(kind, body))

    def open_text(self, text: str) -> Optional[Tuple[str, str]]:
        """(kind, body) when ``text`` is exactly a body plus its valid seal line, else None."""
        if not isinstance(text, str) or "[tdo-seal " not in text:
            return None
        m = _LINE_RE.search(text)
        if m is None:
            return None
        body = text[:m.start()]
        return (m.group(1), body) if self.check(m.group(1), body, m.group(2)) else None

    def is_ours(self, text: str, kind: Optional[str] = None) -> bool:
        opened = self.open_text(text)
        return opened is not None and (kind is None or opened[0] == kind)
