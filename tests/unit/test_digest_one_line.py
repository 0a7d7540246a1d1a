"""``digest.one_line`` reads a result's first line in place: a multi-megabyte result with no
line break cost a copy of the whole text and a search through all of it on every digest. The
line it gives is the one the plain reading gives (strip the text, split the first line,
strip it, drop controls), on any text."""

import random
import time

from tencentdb_offload.context import digest
from tencentdb_offload.context.redact import strict

ALPHABET = "ab \t\x01\x7f\u202b\u00a0\u3000\n\r\x0b\x1c\x85\u2028é字"


def plain(text, limit, slack=80):
    text = (text or "").lstrip()
    lines = text.splitlines()
    first = lines[0] if lines else ""
    kept = [ch for ch in first.strip()
            if ch >= " " and ch != "\x7f" and not "\u202a" <= ch <= "\u202e"][:limit + slack + 1]
    line = strict("".join(kept))
    return line if len(line) <= limit else line[:limit - 1] + "…"


def test_the_first_line_is_the_plain_reading_of_any_text():
    rng = random.Random(7)
    for _ in range(4_000):
        size = rng.choice((0, 1, 3, 20, 200))
        text = "".join(rng.choice(ALPHABET) for _ in range(size))
        limit = rng.choice((1, 5, 30))
        slack = rng.choice((0, 2, 80))
        assert digest.one_line(text, limit, slack) == plain(text, limit, slack), repr(text)


def test_a_huge_line_is_not_read_to_its_end():
    """The work is bounded by the limit: a 20 MB line costs what a 20 KB one does."""
    small, huge = "x" * 20_000, "x" * 20_000_000

    def cost(text):
        began = time.process_time()
        for _ in range(20):
            digest.one_line(text, 100)
        return time.process_time() - began

    assert digest.one_line(huge, 100) == digest.one_line(small, 100)
    assert cost(huge) < 10 * cost(small) + 0.05
