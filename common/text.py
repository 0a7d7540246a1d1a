"""Text the store can hold: what a bad decoder left (lone surrogates) made storable."""

from __future__ import annotations


def clean_text(text: str) -> str:
    """Text SQLite can store: lone surrogates (from bad decoders) become U+FFFD, not an error."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
