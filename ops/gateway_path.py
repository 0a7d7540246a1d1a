"""A Gateway URL that ends in an API path (``/v1``, as OpenAI-style clients are configured, or
``/v2/offload``): the plugin adds the Gateway's paths itself, so nothing answers there. Doctor
names the suffix and offers the URL without it."""

from __future__ import annotations

import re
import urllib.parse
from typing import Tuple

API_SUFFIX = re.compile(r"/v\d+(/offload)?/*$", re.IGNORECASE)


def base_url(url: str) -> Tuple[str, str]:
    """(the suffix, the URL without it) for a URL ending in an API path (``/v1``: an
    OpenAI-style base URL, ``/v2/offload``), which the plugin adds itself; ("", "") otherwise."""
    parts = urllib.parse.urlsplit(url)
    found = API_SUFFIX.search(parts.path)
    if not found:
        return "", ""
    return found.group(0), urllib.parse.urlunsplit(
        (parts.scheme, parts.netloc, parts.path[:found.start()], parts.query, ""))


def wrong_path(url: str, hint: str) -> Tuple[str, str]:
    """(the hint, the URL to set) for a URL where no Gateway answers."""
    suffix, base = base_url(url)
    if base:
        return (" — the URL ends in %s, a path the plugin adds itself: the Gateway's URL is %s"
                % (suffix, base), base)
    return hint, "http://HOST:PORT"
