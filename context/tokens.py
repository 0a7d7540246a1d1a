"""Token estimate (CJK-aware, no tokenizer) and its calibration against provider usage.

The estimate weighs character classes (letters, CJK, punctuation, digits, newlines) plus 4
per message; it needs no vocabulary, so the runtime stays standard-library only. ``Calibrator`` fits ``real = overhead + k * estimate`` from pairs the
engine observes (the estimate of what was sent, the ``prompt_tokens`` the provider reported),
so the budget is enforced in the provider's units, system prompt and tool schemas included.
"""

from __future__ import annotations

import json
import math
import threading
from typing import Any, Dict, Iterable, List, Sequence, Tuple

from .blocks import Block, Kind, blocks_of, content_blocks

PER_MESSAGE = 4
IMAGE_TOKENS = 1_000
# what a calibration may claim, by physical sense: a provider counts 0.5–3 tokens per one of
# ours (the slope band; an inherited point outside it is not a count of a request of ours),
# and what it counts beyond our estimate is part of a request it counted, never more
SLOPE_MIN, SLOPE_MAX = 0.5, 3.0
RATIO_MIN, RATIO_MAX = SLOPE_MIN, SLOPE_MAX
# the fit's overhead is what the provider counts that our estimate does not see (its own
# tools, framing): past a quarter of the window it would leave the compaction target (half
# the window by default) no room for the conversation
OVERHEAD_MAX_SHARE = 0.25
OUTLIER_AFTER, OUTLIER_FACTOR = 4, 2.0      # points before a fit is trusted; how far off is off
# an inherited point over the band only by an overhead that fits the smallest window Hermes
# runs (64K) is a short session's request with tool schemas we never see (select_context), not damage
UNVOUCHED_EXCESS = OVERHEAD_MAX_SHARE * 64_000

# Weights per character class, fitted against the o200k tokenizer on English prose, Chinese,
# code and JSON (bench/tokcheck.py; median error within ±5 % per class): letters ≈ 5.3 per
# token, CJK ≈ 1.5, punctuation ≈ 1, digits ≈ 3, and each newline about half a token.
W_LETTER, W_CJK, W_PUNCT, W_DIGIT, W_NEWLINE = 0.19, 0.67, 0.9, 0.3, 0.6
_PUNCT = b"!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"
_DIGITS = b"0123456789"
SAMPLE_CHARS = 2048     # longer texts are estimated from 4 evenly spaced 512-char slices
SLICE = SAMPLE_CHARS // 4


_MEMO: Dict[Tuple[int, int, bool], int] = {}
_MEMO_MAX = 200_000


def estimate_text(text: str, exact: bool = False) -> int:
    """Estimated tokens of ``text``: constant time for long texts (sampled) unless ``exact``,
    C-speed passes. Exact is for what every request repeats (system prompt, tool schemas):
    a sampling error there (measured: 7 % on a 50 KB tool list) shifts every budget.

    Remembered by (hash, length, exact): Hermes hands the engine the same string objects
    turn after turn and a str caches its hash, so a repeat costs one dict lookup and holds no
    text."""
    if not text:
        return 0
    key = (hash(text), len(text), exact and len(text) > SAMPLE_CHARS)
    hit = _MEMO.get(key)
    if hit is not None:
        return hit
    value = _estimate(text, exact)
    if len(_MEMO) >= _MEMO_MAX:
        _MEMO.clear()
    _MEMO[key] = value
    return value


def _estimate(text: str, exact: bool = False) -> int:
    n = len(text)
    if n > SAMPLE_CHARS and not exact:
        step = n // 4
        sample = "".join(text[i * step:i * step + SLICE] for i in range(4))
    else:
        sample = text
    m = len(sample)
    raw = sample.encode("utf-8", "replace")        # bytes.translate/count are fast C passes
    # CJK characters take 3 UTF-8 bytes, ASCII 1: the byte surplus counts them
    cjk = min(m, (len(raw) - m) // 2)
    punct = len(raw) - len(raw.translate(None, _PUNCT))
    digits = len(raw) - len(raw.translate(None, _DIGITS))
    newlines = raw.count(b"\n")
    letters = max(0, m - cjk - punct - digits - newlines - raw.count(b" "))
    est = (W_LETTER * letters + W_CJK * cjk + W_PUNCT * punct + W_DIGIT * digits +
           W_NEWLINE * newlines) * (n / m)
    return max(1, int(math.ceil(est)))


def _block_tokens(b: Block, exact: bool = False) -> int:
    """A block's text, name, reasoning and arguments, and what it nests; images a flat price."""
    if b.is_image:
        return IMAGE_TOKENS
    total = estimate_text(b.name) + estimate_text(b.thinking, exact)
    if b.kind is not Kind.TOOL_RESULT:          # a result's text is what it nests
        total += estimate_text(b.text, exact)
    if b.in_calls:
        return total + estimate_text(_compact_json(b.args or ""), exact)
    if b.args is not None:
        total += estimate_text(_compact_json(b.args), exact)
    return total + sum(_block_tokens(x, exact) for x in content_blocks(b.inner))


def _compact_json(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError):
        return str(value)


def message_tokens(msg: Dict[str, Any], exact: bool = False) -> int:
    """Estimated tokens of one message: role, content, tool calls and their arguments."""
    return PER_MESSAGE + 1 + sum(_block_tokens(b, exact) for b in blocks_of(msg))


class TokenMemo:
    """``message_tokens`` remembered per message object for the length of one operation
    (a compaction looks at the same messages several times)."""

    def __init__(self) -> None:
        self._seen: Dict[int, Tuple[Any, int]] = {}

    def __call__(self, msg: Any) -> int:
        hit = self._seen.get(id(msg))
        if hit is not None and hit[0] is msg:
            return hit[1]
        value = message_tokens(msg) if isinstance(msg, dict) else 0
        self._seen[id(msg)] = (msg, value)      # holding msg keeps its id from being reused
        return value


def messages_tokens(messages: Iterable[Dict[str, Any]], exact: bool = False) -> int:
    return sum(message_tokens(m, exact) for m in messages if isinstance(m, dict))


def overhead_tokens(messages: Sequence[Dict[str, Any]], tools: Any = None) -> int:
    """Estimated tokens of what every request repeats: the system messages among
    ``messages`` and the ``tools`` schemas, every character counted (see ``estimate_text``)."""
    tools_text = json.dumps(tools, ensure_ascii=False, default=str) if tools else ""
    return (messages_tokens((m for m in messages if isinstance(m, dict)
                             and m.get("role") == "system"), exact=True)
            + estimate_text(tools_text, exact=True))


def request_tokens(messages: Sequence[Dict[str, Any]], tools: Any = None) -> Tuple[int, int]:
    """(what every request repeats, the whole request): estimated tokens of a request of
    ``messages`` and ``tools``, the repeated part counted exactly (``overhead_tokens``)."""
    overhead = overhead_tokens(messages, tools)
    return overhead, overhead + messages_tokens(m for m in messages if isinstance(m, dict)
                                                and m.get("role") != "system")


def _pairs(points: List[Any]) -> List[Tuple[float, float]]:
    return [(float(p[0]), float(p[1])) for p in points
            if isinstance(p, list) and len(p) == 2
            and all(isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v < 1e9
                    for v in p)]


def _plausible(points: List[Any]) -> List[Tuple[float, float]]:
    """The pairs a provider could have counted: positive numbers whose ratio is in
    ``RATIO_MIN``–``RATIO_MAX`` (an overhead of ten windows is not a provider's count), and
    above that ratio only by an overhead no larger than a request an in-band pair counted (a
    session's first small request carries the tool schemas, which ``select_context``'s view does
    not show us: say 2K of ours, 11K counted; every later request counts that overhead too)."""
    pairs = _pairs(points)
    in_band = [y for x, y in pairs if RATIO_MIN <= y / x <= RATIO_MAX]
    smallest = min(in_band, default=0.0)
    return [(x, y) for x, y in pairs
            if y >= RATIO_MIN * x and (y <= RATIO_MAX * x or y - RATIO_MAX * x <= smallest)]


class Calibrator:
    """Least-squares fit of provider prompt tokens against our estimate.

    Thread-safe; keeps the newest ``window`` observations. Until two distinct sizes were seen
    the fit is proportional (slope = actual / estimate, clamped to 0.5–3).
    """

    def __init__(self, default_overhead: int = 0, window: int = 16) -> None:
        self._points: List[Tuple[float, float]] = []
        self._window = window
        self._default_overhead = default_overhead
        self._lock = threading.Lock()
        self._fit: Tuple[float, float] = (1.0, float(default_overhead))
        self._window_tokens = 0             # the context window, once the engine knows it
        self._outliers = 0                  # counts set aside in a row (``_outlier``)

    def forked(self) -> None:
        """In a forked child: a parent thread may have held the lock at the fork."""
        self._lock = threading.Lock()

    def observe(self, estimate: int, actual: int) -> None:
        if estimate <= 0 or actual <= 0:
            return
        with self._lock:
            if self._outlier(float(estimate), float(actual)):
                self._outliers += 1
                return
            self._outliers = 0
            self._points.append((float(estimate), float(actual)))
            del self._points[:-self._window]
            self._fit = self._solve()

    def _outlier(self, x: float, y: float) -> bool:
        """A count far off an established fit (one provider report 10x the truth would pin
        the slope for the next 15 answers) is set aside; the third in a row is believed: the
        provider or the content really changed."""
        if len(self._points) < OUTLIER_AFTER or self._outliers >= 2:
            return False
        expected = self._fit[1] + self._fit[0] * x
        return y > OUTLIER_FACTOR * expected or y * OUTLIER_FACTOR < expected

    def plausible_anchor(self, listed: int, counted: int) -> bool:
        """A host's count of a list we estimate at ``listed``, before any calibration: believed
        only when a provider could have counted it (a rough chars/4 count of CJK text, or a
        count ten times the list, would make the first fit wrong for the session)."""
        excess = counted - RATIO_MAX * listed
        return counted >= RATIO_MIN * listed and (
            excess <= 0 or not self._window_tokens or excess <= OVERHEAD_MAX_SHARE * self._window_tokens)

    def _solve(self) -> Tuple[float, float]:
        pts = self._points
        n = len(pts)
        xs = [p[0] for p in pts]
        mean_x = sum(xs) / n
        mean_y = sum(p[1] for p in pts) / n
        var = sum((x - mean_x) ** 2 for x in xs)
        if n >= 2 and var > (0.05 * mean_x) ** 2:
            slope = sum((x - mean_x) * (y - mean_y) for x, y in pts) / var
            slope = min(SLOPE_MAX, max(SLOPE_MIN, slope))
        elif mean_y > SLOPE_MAX * mean_x:
            # one distinct size counted beyond any tokenizer's ratio: the tool schemas the
            # engine's view of a request leaves out (every later request carries them), so the
            # excess is overhead; a slope of 3 would triple the next step's results
            slope = 1.0
        else:
            # one distinct size: proportional scaling is the safer reading (tokenizer ratio)
            slope = max(SLOPE_MIN, mean_y / mean_x)
        # the overhead is part of every request counted: never more than the smallest one,
        # nor more than a physical share of the window
        overhead = min(max(0.0, mean_y - slope * mean_x), min(p[1] for p in pts))
        if self._window_tokens:
            overhead = min(overhead, OVERHEAD_MAX_SHARE * self._window_tokens)
        return slope, overhead

    def bound(self, window_tokens: int) -> None:
        """The context window the requests go to: the fit's overhead stays within its share."""
        if isinstance(window_tokens, int) and window_tokens > 0 \
                and window_tokens != self._window_tokens:
            with self._lock:
                self._window_tokens = window_tokens
                if self._points:
                    self._fit = self._solve()

    @property
    def slope(self) -> float:
        return self._fit[0]

    @property
    def points(self) -> int:
        return len(self._points)

    @property
    def overhead(self) -> int:
        return int(self._fit[1])

    def to_real(self, estimate: int) -> int:
        """Provider tokens for a request whose messages estimate to ``estimate``."""
        slope, overhead = self._fit
        return int(math.ceil(overhead + slope * estimate))

    def to_estimate(self, real_budget: int) -> int:
        """The message estimate that fits a provider budget of ``real_budget`` tokens."""
        slope, overhead = self._fit
        return max(0, int((real_budget - overhead) / slope))

    def export(self) -> List[List[float]]:
        """The observations, for the next process on this conversation (``seed``)."""
        with self._lock:
            return [[x, y] for x, y in self._points]

    def seed(self, points: Any) -> str:
        """Start from ``export()``ed points, unless this one has observed something itself.
        Only physically sensible points are taken (``_plausible``). Returns what was ignored
        and why ("" when nothing was)."""
        if not isinstance(points, list):
            return "" if points is None else "calibration ignored: not a list of points"
        recent = points[-self._window:]
        good = _plausible(recent)
        with self._lock:
            if good and not self._points:
                self._points = good
                self._fit = self._solve()
        dropped = len(recent) - len(good)
        pairs = _pairs(recent)
        if not good and len(pairs) == len(recent) and all(
                0 < y - RATIO_MAX * x <= UNVOUCHED_EXCESS for x, y in pairs):
            # a short session: every request small, none in the band to vouch for the tool
            # schemas' overhead; left out unsaid (each resumed turn logged a false alarm)
            dropped = 0
        return ("calibration: %d of %d inherited points ignored (not a plausible provider "
                "count)" % (dropped, len(recent))) if dropped else ""

    def snapshot(self) -> Dict[str, Any]:
        return {"slope": round(self.slope, 3), "overhead": self.overhead,
                "points": self.points}
