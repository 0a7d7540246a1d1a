"""Where compaction triggers: Hermes' ``compression.model_thresholds``, matched the way the host
matches them, and the host's own floor on small windows.

A host that has the table sets it on the engine before ``update_model``. For a model it names,
its value wins over ours: the longest matching substring, a ``provider:``-scoped key before a bare one of
the same length (the host's rule, so one table means the same under both engines). A value at
or below our landing ratio is ignored: every compaction would trigger the next.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Tuple

from ..hermes.host import Host
from .config import Settings

HOST_MINIMUM_CONTEXT = 64_000   # Hermes' MINIMUM_CONTEXT_LENGTH: no window is smaller
SMALL_WINDOW_RATIO = 0.85       # where the built-in triggers when that floor binds
CEILING = 0.90                  # of the window: no request above it (compaction.ceiling)
# In the messaging gateway of a host that checks every request, on an 85K-128K window (over the
# 64K floor's reach), with THRESHOLD / COMPACT_RATIO unset: trigger at 0.85, land at 0.35, and the newest step's unread results
# stay whole over the landing (``compaction.flow``): fewer rewrites at the same cost there,
# and none of the reads the built-in hides; on a 64K window 0.75 / 0.45 stay, they cost less
# there (docs/benchmarks.md, "Why the defaults are what they are").
MESSAGING_TRIGGER_RATIO = 0.85
MESSAGING_WINDOWS = (int(HOST_MINIMUM_CONTEXT / 0.75) + 1, 131_072)
MESSAGING_LANDING_RATIO = 0.35


def _rank(key: str, model: str, provider: str) -> Optional[Tuple[int, int]]:
    scope, sep, part = key.partition(":")
    if sep:
        return (len(part), 1) if scope.strip().lower() == provider and part in model else None
    return (len(key), 0) if key in model else None


def small_window_trigger(context_length: int, trigger: int) -> int:
    """Never earlier than the built-in on a window its 64K floor binds (64K-85K, 0.85 of the
    window at 64K): there 0.75 leaves less than one tool-heavy turn between the landing and the
    next compaction, and one compaction more is one cache break more (the CLI of a host with the
    floor, 9 turns: 4 compactions where the built-in made 3, at the same cost)."""
    if context_length < HOST_MINIMUM_CONTEXT:
        return trigger
    return max(trigger, min(HOST_MINIMUM_CONTEXT, int(context_length * SMALL_WINDOW_RATIO)))


def messaging_window(context_length: int) -> bool:
    """A window the messaging gateway's defaults are for (``MESSAGING_WINDOWS``)."""
    return MESSAGING_WINDOWS[0] <= context_length <= MESSAGING_WINDOWS[1]


def messaging_trigger(context_length: int, trigger: int) -> int:
    """The messaging gateway of a host that checks every request, THRESHOLD unset: never before
    ``MESSAGING_TRIGGER_RATIO`` of an 85K-128K window. Every request is checked before it leaves
    (``compaction.request_cut``)."""
    if not messaging_window(context_length):
        return trigger
    return max(trigger, int(context_length * MESSAGING_TRIGGER_RATIO))


def _landing_unset(settings: "Settings", window: int = 0) -> bool:
    """COMPACT_RATIO unset, no cap that binds under the gateway's trigger on ``window`` (any
    cap when the window is unknown), and the messaging gateway's landing below the threshold."""
    cap = settings.max_context_tokens
    binds = cap and (not window or cap < messaging_trigger(window, 0))
    return not settings.ratio_explicit and not binds and MESSAGING_LANDING_RATIO < settings.threshold


def messaging_landing(settings: "Settings", context_length: int, messaging: bool) -> bool:
    """Whether the messaging gateway's landing (and its unread results kept whole over it)
    applies: in it (``messaging``), on such a window, with the landing unset (``_landing_unset``)."""
    return messaging and messaging_window(context_length) and _landing_unset(settings, context_length)


def unread_kept_whole(settings: "Settings", context_length: int, messaging: bool,
                      trigger_tokens: int) -> bool:
    """Whether a landing keeps the newest step's unread results whole up to the ceiling: in the
    messaging gateway of a host that checks every request, where its own landing applies or its
    trigger sits at the ceiling (the small-window floor: a mid-turn compaction there comes only
    when the pool refused the turn start's)."""
    return messaging_landing(settings, context_length, messaging) or (
        messaging and trigger_tokens >= int(context_length * CEILING))


def landing_tokens(settings: "Settings", context_length: int, messaging: bool,
                   threshold: Optional[float] = None) -> int:
    """Where a compaction lands on ``context_length``: the messaging gateway's landing where it
    applies (``messaging_landing``), else the settings' target under the applying ``threshold``."""
    if messaging_landing(settings, context_length, messaging):
        return int(context_length * MESSAGING_LANDING_RATIO)
    return settings.target_tokens(context_length, threshold)


@dataclass(frozen=True)
class Trigger:
    """Where compaction starts on one window: tokens, and why when not the configured ratio."""
    tokens: int
    window: int
    why: str = ""
    model_ratio: Optional[float] = None     # the compression.model_thresholds value it came from

    @property
    def ratio(self) -> float:
        return self.tokens / self.window if self.window else 0.0

    def describe(self) -> str:
        """``85% of the 64,000-token window = 54,400 tokens (the host's small-window floor)``"""
        return "%.0f%% of the %s-token window = %s tokens%s" % (
            self.ratio * 100, format(self.window, ","), format(self.tokens, ","),
            " (%s)" % self.why if self.why else "")


def applying_trigger(settings: "Settings", window: int, *, host_floor: bool, messaging: bool = False,
                     model_ratio: Optional[float] = None) -> Trigger:
    """The trigger that applies on ``window``: a ``compression.model_thresholds`` value
    (``model_ratio``) or the configured threshold, the cap when it is lower, and on a host with
    the 64K floor (``host_floor``: ``Host.small_window_floor``) never earlier than the built-in unless
    the user chose the threshold; in the messaging gateway of a host that checks every request
    (``messaging``) ``messaging_trigger`` instead."""
    tokens = settings.trigger_tokens(window, model_ratio)
    why = "compression.model_thresholds" if model_ratio is not None else ""
    cap = settings.max_context_tokens
    # a cap is a ceiling, not a chosen threshold: where it does not bind, the host's rules stay
    unset = model_ratio is None and not settings.threshold_explicit and tokens != cap
    if unset and host_floor:
        floored = small_window_trigger(window, tokens)
        if floored != tokens:
            # a host with the floor checks each turn start (its preflight): a step that would
            # pass the ceiling is compacted before it (``compaction.ceiling``), so mid-turn the
            # trigger can wait for the ceiling itself
            floored = max(floored, int(window * CEILING))
            tokens, why = floored, ("the host's small-window floor, and its turn-start check: "
                                    "never before its built-in")
    if unset and messaging:
        later = messaging_trigger(window, tokens)
        if later != tokens:
            tokens, why = later, "the messaging gateway on an 85K-128K window"
    if cap and tokens >= cap:
        tokens, why = cap, "TENCENTDB_OFFLOAD_MAX_CONTEXT_TOKENS"
    return Trigger(tokens, window, why, model_ratio)


def trigger_text(settings: "Settings", trigger: Optional[Trigger], host: Optional[Host] = None) -> str:
    """The trigger as status lines lead with it: the applying one when the window is known,
    else the configured threshold and where it may differ on ``host`` (None: not known)."""
    if trigger is not None and trigger.window:
        return "compaction at " + trigger.describe()
    floor = host is None or host.small_window_floor
    # the floor's trigger is the ceiling (``applying_trigger``): the built-in's 0.85 at 64K is
    # what it never comes before, not where it compacts
    note = "" if settings.threshold_explicit or not floor else (
        " (on a host with the small-window floor: %.0f%% of a 64K-85K window, never before its "
        "built-in; in its messaging gateway %.0f%% of an 85K-128K one)"
        % (CEILING * 100, MESSAGING_TRIGGER_RATIO * 100))
    cap = (", at most %s tokens" % format(settings.max_context_tokens, ",")
           if settings.max_context_tokens else "")
    return "compaction at %.0f%% of the window%s%s" % (settings.threshold * 100, cap, note)


def messaging_may_apply(host: Optional[Host], window: int) -> bool:
    """Whether the messaging gateway's landing can apply on ``host`` (None: not known) and
    ``window`` (0: not known): a host that selects context, and an 85K-128K window."""
    return (host is None or host.selects_context) and (not window or messaging_window(window))


def landing_text(settings: "Settings", trigger: Optional[Trigger] = None,
                 host: Optional[Host] = None) -> str:
    """``down to 45% (35% of an 85K-128K window in a messaging gateway that checks every
    request)``, the note only where it can apply (``messaging_may_apply``); under a cap that binds,
    the cap's landing (``Settings.target_tokens``), not the window's share."""
    window = trigger.window if trigger else 0
    unset = _landing_unset(settings, window) and messaging_may_apply(host, window)
    note = (" (%.0f%% of an 85K-128K window in a messaging gateway that checks every request)"
            % (MESSAGING_LANDING_RATIO * 100)) if unset else ""
    cap = settings.max_context_tokens
    if cap and trigger is not None and trigger.window:
        tokens = settings.target_tokens(trigger.window, trigger.model_ratio)
        if tokens != int(trigger.window * settings.compact_ratio):
            return "down to %s tokens (the cap x COMPACT_RATIO / THRESHOLD)" % format(tokens, ",")
    elif cap:       # the window unknown: where the cap binds, it sets the landing
        note = ", or %s tokens where the cap applies" % format(
            int(cap * settings.compact_ratio / settings.threshold), ",")
    return "down to %.0f%%%s" % (settings.compact_ratio * 100, note)


def model_threshold(table: Any, model: str, provider: str, *, floor: float) -> Optional[float]:
    """The table's value for ``model`` (the host's matching rule), None when none applies."""
    if not isinstance(table, dict) or not table or not model:
        return None
    provider = (provider or "").strip().lower()
    ranked = [(r, raw) for key, raw in table.items()
              for r in [_rank(str(key), model, provider)] if r is not None]
    if not ranked:
        return None
    try:
        value = float(max(ranked, key=lambda pair: pair[0])[1])
    except (TypeError, ValueError):
        return None
    return value if floor < value < 1.0 else None
