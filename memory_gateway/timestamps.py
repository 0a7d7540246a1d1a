"""Timestamps in the one format the Gateway can compare."""

from __future__ import annotations

import datetime
from typing import Optional


def gateway_timestamp(now: Optional[datetime.datetime] = None) -> str:
    """UTC ``YYYY-MM-DDTHH:MM:SS.mmmZ``: the Gateway compares timestamps as plain strings,
    so any other ISO form (``+00:00``, microseconds) sorts wrong against its own."""
    now = now or datetime.datetime.now(datetime.timezone.utc)
    now = now.astimezone(datetime.timezone.utc)
    return now.strftime("%Y-%m-%dT%H:%M:%S.") + "%03dZ" % (now.microsecond // 1000)
