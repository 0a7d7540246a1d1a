"""A tool pair's call arguments cut to fit the Gateway's body limit.

A call whose arguments are the large part (``write_file`` of a 2 MB file, a small result) was
refused for good when its result could not be cut further; the arguments are cut instead. The
whole call stays in the local archive.
"""

from __future__ import annotations

import json
from typing import Any

ARGS_NOTE = ("\n[... %d characters of the call's arguments not sent to the Gateway; the whole "
             "call is in the local archive]")


def args_text(params: Any) -> str:
    """The arguments as the Gateway reads them (a cut is already text)."""
    return params if isinstance(params, str) else json.dumps(params, ensure_ascii=False,
                                                             default=str)


def cut_args(params: Any, keep: int) -> Any:
    """``params`` as at most ``keep`` characters of its JSON and a note of what was left out."""
    text = args_text(params)
    if len(text) <= keep:
        return params
    return text[:keep] + ARGS_NOTE % (len(text) - keep)
