"""The prompt-cache price model every cost figure uses: a token read from the cache costs 0.1,
a token written to it 1.25 (in units of one uncached input token, as providers with prompt
caching price them: docs/benchmarks.md). The benchmarks' cost column and the cost of each
compaction in ``status`` and ``report`` are this one model."""

from __future__ import annotations

from typing import Any, Mapping

READ, WRITE = 0.1, 1.25
MODEL = "read %s, write %s" % (READ, WRITE)    # how a figure names the model it used
UNITS = ("units of one uncached input token under the cache model (%s), for the first request "
         "after each compaction" % MODEL)
# said where the provider's (or host's) usage carries no cache figures at all
NOT_REPORTED = "the provider reports no cached tokens"


def cost(tokens: int, cached: int) -> float:
    """One request of ``tokens`` whose first ``cached`` were read from the cache; the rest
    is written."""
    cached = max(0, min(cached, tokens))
    return READ * cached + WRITE * (tokens - cached)


def reports_caching(usage: Mapping[str, Any]) -> bool:
    """The usage says something about the cache: a read or a write above 0. A host that passes
    the cache buckets on passes both as 0 when the provider reports neither, which is not
    "nothing was cached"."""
    return any(isinstance(usage.get(k), int) and not isinstance(usage.get(k), bool)
               and usage.get(k) > 0 for k in ("cache_read_tokens", "cache_write_tokens"))
