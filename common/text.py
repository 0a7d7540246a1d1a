"""Text the store can hold: what a bad decoder left (lone surrogates) made storable."""

from __future__ import annotations

import re

_LONE = re.compile("[\ud800-\udfff]")


def clean_text(text: str) -> str:
    """Text SQLite can store: each lone surrogate (from bad decoders) becomes one U+FFFD, not
    an error (replacing its UTF-8 bytes made three of each)."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return _LONE.sub("\ufffd", text)
