"""A summary that opens by restating the step it sums up: what it says beyond that.

The Gateway's L1 summaries open with the call ("read_file a.py: it defines parse()"), and
where they are shown the step is named already (a canvas node's label, a digest's call list),
so the restatement is words the model reads twice in every request. Pure.
"""

from __future__ import annotations

import re

STEP_CHARS = 400            # a step is a line, not a page: longer ones are not matched


def beyond(summary: str, step: str) -> str:
    """``summary`` without an opening restatement of ``step`` (the same words, colons and
    spacing aside, ending at a word's end); as it is when it does not open so, or when nothing
    would be left."""
    if not step.strip() or len(step) > STEP_CHARS:
        return summary
    words = step.replace(":", " ").split()
    again = re.match(r"[\s:]*" + r"[\s:]*".join(map(re.escape, words)) + r"(?:[\s:]+|(?=[\"\])}]|$))",
                     summary)
    rest = summary[again.end():] if again else ""
    return rest if rest.strip("\"])} ") else summary
