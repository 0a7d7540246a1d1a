"""The yardstick: what the (fake) model received, per conversation, for one engine.

Both side-by-side suites (the messaging gateway, tests/e2e/test_messaging_gateway.py, and the
per-turn-process CLI, tests/e2e/test_side_by_side_cli.py) run the built-in compressor and this
plugin on the same fake model and workload in one test and reduce each run to a :class:`Row`
with :func:`analyse`. Definitions (per conversation, main requests = requests with ``tools``,
in arrival order; token count = the fake model's ``ceil(chars / 4)``, see
``tests/fakes/fake_llm.prompt_tokens``):

* **rewrite**: a main request whose predecessor's messages are not a prefix of its own
  (message = role + tool_call_id + text incl. tool calls, ``fake_llm.request_units``). An
  append-only conversation has 0; each rewrite breaks the provider's prompt cache from the
  first changed message on.
* **compaction**: a rewrite that also shrank the request (fewer messages, or
  ``harness.MIN_TOKEN_DROP`` fewer tokens). **Over the trigger right after a compaction**:
  the first request after it still above the engine's trigger.
* **fewest rewrites at the headroom**: the least number of rewrites ANY engine needs on this
  conversation if it keeps every request at most ``HEADROOM`` of the window and shows every
  file read whole in the request where it first appears: the first request's tool schemas and
  system prompt stay, each read adds its file's size, and a rewrite that drops everything else
  happens only when the next request would pass the headroom (latest first is fewest). Other
  messages are not counted, so it is a lower bound. An engine below it sent a request over
  the headroom or hid a read.
* **largest context right after a rewrite, of the window**: max tokens of a rewritten
  request / the window.
* **provider cost** (miss-token units): each request (main AND auxiliary, e.g. the built-in's
  summariser calls) costs ``0.1 x cached + 1.25 x (tokens - cached)``, where ``cached`` is
  its longest common prefix with ANY earlier request of that conversation
  (``fake_llm.PrefixCache``, one cache per conversation, tool schemas first). Completion
  tokens and the Gateway's own summariser are not counted. **Cost of the read turns**: the
  same, over the turns whose command is ``read`` (an auxiliary request counts with the turn it
  ran in) — the work both engines do alike; a recall turn is not (the built-in has no recall
  tool: it answers with an error, this plugin with the text, which it then carries).
  **If each hidden file is read again**: the cost plus one write of every file no request
  carried whole (a real model asked for it and would read it back). **Cached share** = cached / all
  prompt tokens. With a ``ttl`` (seconds) the cache expires like a provider's: a request more
  than ``ttl`` seconds after the previous one of its conversation reads nothing from it.
* **offered load**: the tokens the conversation would reach if nothing were ever dropped:
  the first request, plus every message first seen in a later one, except that each
  ``read_file`` result counts once, at its largest size on the wire or its file's bytes / 4
  if that is more (an engine may trim or compact a batch of fresh results before the model
  sees them). A workload that overflows the window twice offers >= 2 windows.
"""
from __future__ import annotations

import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402
import pytest  # noqa: E402
from tests.fakes.fake_llm import PrefixCache, prompt_tokens, request_units  # noqa: E402
from tests.plugin_loader import load_plugin  # noqa: E402

load_plugin()       # the plugin's own cache model: status and report price compactions with it
from tencentdb_offload.common import cache_model  # noqa: E402

CACHE_READ, CACHE_WRITE = cache_model.READ, cache_model.WRITE
HEADROOM = 0.90       # issue 29: every request at most this share of the window


def builtin_trigger(window: int) -> int:
    """The built-in compressor's trigger on a small window (0.19 and 0.22): its 64K floor
    reaches the window there, so it compacts at 85 % of the window."""
    return int(0.85 * window)


@dataclass
class Conversation:
    """Figures of one conversation (see the module docstring)."""

    requests: int = 0
    auxiliary: int = 0
    over_window: int = 0
    largest: int = 0
    rewrites: int = 0
    compactions: int = 0
    over_trigger_after_compaction: int = 0
    after_rewrite_max: int = 0
    prompt: int = 0
    cached: int = 0
    cost: float = 0.0
    offered: int = 0
    unseen: int = 0     # files read whose result no request carried whole (hidden when fresh)
    read_cost: float = 0.0  # the cost of the turns whose command is ``read``
    unseen_tokens: int = 0  # the sizes of those hidden files (what reading them again writes)
    other_turns: int = 0    # main requests of turns with another command (recall, ...)
    fewest_rewrites: int = 0  # the least any engine needs at the headroom (module doc)
    # per main request: "<K tokens>k/<reads shown>-<of them not whole>", "!" after a rewrite
    # ("aux" for auxiliary calls), printed when a bar fails so one run shows where results
    # were hidden and where the prefix was rewritten
    trace: List[str] = field(default_factory=list)


def _messages(body: Dict[str, Any]) -> List[tuple]:
    return [u for u in request_units(body) if u[0][0] == "message"]


def conversation(exchanges: Sequence[Any], *, window: int, trigger: int,
                 reads: Mapping[str, str] = {}, ttl: Optional[float] = None) -> Conversation:
    """Figures of ONE conversation's exchanges (``fake_llm.Exchange``, arrival order);
    ``reads`` maps the ids of its ``read_file`` calls to the files read (for offered load);
    ``ttl``: the cache's idle expiry in seconds (None: it never expires)."""
    out, cache, seen, prev = Conversation(), PrefixCache(), set(), None
    read_max: Dict[str, int] = {}
    read_chars: Dict[str, int] = {}     # the longest text of each read's result in any request
    last_at: Optional[float] = None
    verb = ""
    size = {cid: Path(p).stat().st_size for cid, p in reads.items()}
    read_first: Dict[str, int] = {}     # read id -> the main request it first appears in
    first = fixed = 0                   # the first request's tokens; its tool schemas and system prompt
    for ex in exchanges:
        if ttl is not None:
            if last_at is not None and ex.at - last_at > ttl:
                cache = PrefixCache()       # expired: everything is written again
            last_at = ex.at
        tokens = prompt_tokens(ex.body)
        cached = cache.add(ex.body)
        out.prompt += tokens
        out.cached += cached
        cost = cache_model.cost(tokens, cached)
        out.cost += cost
        verb = verb if ex.auxiliary else ex.command[0]      # an auxiliary call: its turn's
        out.read_cost += cost if verb == "read" else 0.0
        if ex.auxiliary:
            out.auxiliary += 1
            out.trace.append("aux")
            continue
        units = _messages(ex.body)
        shown = [u for u in units if u[0][1] == "tool" and u[0][2] in size]
        if prev is None:
            first, fixed = tokens, -(-sum(len(u[1]) for u in request_units(ex.body)
                                          if u[0][0] == "tools" or u[0][1] == "system") // 4)
        for u in units:
            if u[0][1] == "tool" and u[0][2] in reads:
                read_chars[u[0][2]] = max(read_chars.get(u[0][2], 0), len(u[1]))
                read_first.setdefault(u[0][2], out.requests)
        for u in units if prev is not None else ():
            if u in seen:
                continue
            if u[0][1] == "tool" and u[0][2] in reads:
                read_max[u[0][2]] = max(read_max.get(u[0][2], 0), -(-len(u[1]) // 4))
            else:
                out.offered += -(-len(u[1]) // 4)
        out.offered += tokens if prev is None else 0
        seen.update(units)
        out.requests += 1
        out.other_turns += verb != "read"
        out.largest = max(out.largest, tokens)
        out.over_window += tokens > window
        rewrote = prev is not None and units[:len(prev[0])] != prev[0]
        out.trace.append("%.1fk/%d-%d%s" % (tokens / 1000, len(shown),
                                            sum(len(u[1]) < size[u[0][2]] for u in shown),
                                            "!" if rewrote else ""))
        if rewrote:
            out.rewrites += 1
            out.after_rewrite_max = max(out.after_rewrite_max, tokens)
            if len(units) < len(prev[0]) or prev[1] - tokens >= harness.MIN_TOKEN_DROP:
                out.compactions += 1
                out.over_trigger_after_compaction += tokens > trigger
        prev = (units, tokens)
    out.offered += sum(max(read_max.get(cid, 0), -(-n // 4)) for cid, n in size.items())
    # whole: at least the file's size (the host's read adds line numbers, never removes text)
    hidden = [n for cid, n in size.items() if read_chars.get(cid, 0) < n]
    out.unseen = len(hidden)
    out.unseen_tokens = sum(-(-n // 4) for n in hidden)
    added = [0] * out.requests          # the whole reads each main request shows first
    for cid, at in read_first.items():
        added[at] += -(-size[cid] // 4)
    out.fewest_rewrites = fewest_rewrites(first, fixed, added[1:], int(HEADROOM * window))
    return out


def fewest_rewrites(first: int, fixed: int, added: Sequence[int], ceiling: int) -> int:
    """The least rewrites that keep every request <= ``ceiling`` tokens when the requests
    after a ``first`` one add ``added`` tokens each that must be shown whole, and a rewrite
    can drop everything but ``fixed`` (greedy: rewriting as late as possible is fewest)."""
    rewrites, now = 0, first
    for more in added:
        if now + more > ceiling:
            rewrites += 1
            now = fixed
        now += more
    return rewrites


@dataclass
class Row:
    """One engine's figures over every conversation of a run."""

    engine: str
    window: int
    trigger: int
    turns: int
    answered: int
    convs: List[Conversation] = field(default_factory=list)
    failed: List[Any] = field(default_factory=list)       # what the suite says went wrong per turn
    extra: Dict[str, Any] = field(default_factory=dict)   # suite-specific figures, printed

    def total(self, name: str) -> float:
        return sum(getattr(c, name) for c in self.convs)

    @property
    def over_window(self) -> int:
        return int(self.total("over_window"))

    @property
    def over_trigger_after_compaction(self) -> int:
        return int(self.total("over_trigger_after_compaction"))

    @property
    def rewrites_per_conversation(self) -> float:
        return self.total("rewrites") / max(1, len(self.convs))

    @property
    def fewest_rewrites_per_conversation(self) -> float:
        return self.total("fewest_rewrites") / max(1, len(self.convs))

    @property
    def after_rewrite_share(self) -> float:
        return max((c.after_rewrite_max for c in self.convs), default=0) / self.window

    @property
    def largest_share(self) -> float:
        return max((c.largest for c in self.convs), default=0) / self.window

    @property
    def cost(self) -> float:
        return self.total("cost")

    @property
    def cost_with_reads_again(self) -> float:
        """The cost plus one cache write of every hidden file: what a model that asked for a
        result and got a trimmed one pays to read it again (the least it can pay)."""
        return self.cost + CACHE_WRITE * self.total("unseen_tokens")

    @property
    def cached_share(self) -> float:
        return self.total("cached") / max(1, self.total("prompt"))

    @property
    def floor(self) -> float:
        """The least any engine that shows the model every message whole can pay: each offered
        token written once (a token's first appearance is never a cached prefix)."""
        return CACHE_WRITE * self.total("offered")

    @property
    def min_offered(self) -> int:
        return min((c.offered for c in self.convs), default=0)

    def lines(self) -> Dict[str, str]:
        """The table's cells, keyed by the row label."""
        cells = {
            "turns answered": f"{self.answered}/{self.turns}",
            "main requests (auxiliary)": f"{int(self.total('requests'))} ({int(self.total('auxiliary'))})",
            f"requests over the {self.window:,} window": f"{self.over_window} (largest "
                                                         f"{self.largest_share:.2f} of the window)",
            "compactions (over the trigger right after one)": f"{int(self.total('compactions'))} "
                                                             f"({self.over_trigger_after_compaction}, "
                                                             f"trigger {self.trigger:,})",
            "rewrites per conversation": f"{self.rewrites_per_conversation:.1f}",
            f"fewest rewrites per conversation at <= {HEADROOM:.2f} of the window, every read whole":
                f"{self.fewest_rewrites_per_conversation:.1f}",
            "largest context right after a rewrite, of the window": f"{self.after_rewrite_share:.2f}",
            "provider cost (cache read 0.1, write 1.25)": f"{self.cost / 1e6:.2f}M units, "
                                                          f"{self.cached_share:.0%} cached",
            **({"provider cost of the read turns (the same work in both engines)":
                f"{self.total('read_cost') / 1e6:.3f}M units"} if self.total("other_turns") else {}),
            "offered load per conversation, min (windows)": f"{self.min_offered / self.window:.1f}",
            "files read that no request carried whole": f"{int(self.total('unseen'))}",
            "provider cost if each of them is read again (written once more)":
                f"{self.cost_with_reads_again / 1e6:.2f}M units",
            "lossless cost floor (each offered token written once)": f"{self.floor / 1e6:.2f}M units; "
                                                                     f"cost {self.cost / max(1.0, self.floor):.2f}x it",
        }
        cells.update({k: str(v) for k, v in self.extra.items()})
        return cells


def analyse(engine: str, conversations: Mapping[str, Sequence[Any]], *, window: int, trigger: int,
            turns: int, answered: int, failed: Sequence[Any] = (),
            reads: Mapping[str, Mapping[str, str]] = {}, extra: Mapping[str, Any] = {},
            ttl: Optional[float] = None) -> Row:
    """One engine's :class:`Row` from ``{conversation: [exchanges]}``, the turn counts and
    ``{conversation: {read_file call id: path}}``; ``ttl`` prices with an expiring cache."""
    convs = [conversation(exs, window=window, trigger=trigger, reads=reads.get(name, {}), ttl=ttl)
             for name, exs in conversations.items()]
    return Row(engine, window, trigger, turns, answered, convs, list(failed), dict(extra))


def side_by_side(title: str, rows: Iterable[Row]) -> str:
    """A Markdown table, one column per engine (paste-able into docs/benchmarks.md)."""
    rows = list(rows)
    labels: List[str] = []
    for r in rows:
        labels += [k for k in r.lines() if k not in labels]
    head = f"{title}\n\n| | " + " | ".join(r.engine for r in rows) + " |\n|---|" + "---|" * len(rows)
    body = ["| %s | %s |" % (k, " | ".join(r.lines().get(k, "") for r in rows)) for k in labels]
    return "\n".join([head] + body)


def show(request: Any, title: str, rows: Sequence[Row], more: str = "") -> None:
    """Print the side-by-side table past pytest's capture (it shows in every run's output)."""
    harness.print_past_capture(request, side_by_side(title, rows) + more)


# Issue 15's bars for the plugin, one function each (every suite has one test per bar).
def assert_answers_every_turn(plugin: Row) -> None:
    assert plugin.answered == plugin.turns, plugin.failed[:6]


def assert_never_over_the_window(plugin: Row) -> None:
    assert plugin.over_window == 0, plugin.lines()


def assert_every_request_under_the_headroom(plugin: Row) -> None:
    """Issue 29: room left for the answer and for estimates that err — every request at most
    HEADROOM of the window."""
    assert plugin.largest_share <= HEADROOM, (plugin.largest_share, plugin.lines())


def assert_never_over_the_trigger_after_a_compaction(plugin: Row) -> None:
    assert plugin.over_trigger_after_compaction == 0, plugin.lines()


def assert_rewrites_within(plugin: Row, builtin: Row, extra: int = 0) -> None:
    """No more rewrites than the built-in's, or than the fewest any engine needs that keeps
    every request under the headroom and every read whole (the built-in makes fewer only by
    passing the headroom or hiding reads); ``extra`` rewrites more in the whole run at most."""
    bar = max(builtin.rewrites_per_conversation, plugin.fewest_rewrites_per_conversation)
    allowed = bar + extra / max(1, len(plugin.convs)) + 1e-9
    assert plugin.rewrites_per_conversation <= allowed, _traces(
        "rewrites per conversation: %s %.2f, %s %.2f, fewest %.2f, %d more allowed in the run"
        % (plugin.engine, plugin.rewrites_per_conversation, builtin.engine,
           builtin.rewrites_per_conversation, plugin.fewest_rewrites_per_conversation, extra),
        plugin, builtin)


def assert_rewrites_near_the_floor(plugin: Row, builtin: Row, slack: float = 0.5) -> None:
    """Issue 55: at most ``slack`` rewrites per conversation over the fewest any engine needs
    at <= 0.90 of the window with every read whole, and no more than the built-in's."""
    near = plugin.fewest_rewrites_per_conversation + slack + 1e-9
    assert plugin.rewrites_per_conversation <= min(near, builtin.rewrites_per_conversation + 1e-9), \
        _traces("rewrites per conversation: %s %.2f, %s %.2f, fewest %.2f (+%.1f allowed)"
                % (plugin.engine, plugin.rewrites_per_conversation, builtin.engine,
                   builtin.rewrites_per_conversation, plugin.fewest_rewrites_per_conversation,
                   slack), plugin, builtin)


def _traces(head: str, *rows: Row) -> str:
    """``head``, then each conversation's requests (tokens/reads shown-not whole, "!" a rewrite)."""
    return "\n".join([head + "; per conversation, each request (tokens/reads shown-not whole, "
                      "! a rewrite):"]
                     + ["%s %d hidden, %d rewrites: %s" % (row.engine, c.unseen, c.rewrites,
                                                          " ".join(c.trace))
                        for row in rows for c in row.convs])


def assert_cost_within(plugin: Row, builtin: Row, share: float = 1.0) -> None:
    """Issue 55's rule: every file an engine never showed whole is priced as read again (one
    cache write of it), so hiding a read is not a saving; where neither engine hides any,
    this is the raw cost."""
    mine, theirs = plugin.cost_with_reads_again, builtin.cost_with_reads_again
    assert mine <= share * theirs, (mine, theirs, mine / theirs, "raw", plugin.cost, builtin.cost)


def assert_read_turns_cost_within(plugin: Row, builtin: Row, share: float = 1.0) -> None:
    """The same work priced alike: the read turns, which both engines answer the same way,
    a hidden read priced as read again (``assert_cost_within``)."""
    mine, theirs = (row.total("read_cost") + CACHE_WRITE * row.total("unseen_tokens")
                    for row in (plugin, builtin))
    assert theirs > 0 and mine <= share * theirs, (mine, theirs, mine / max(1.0, theirs))


def assert_hides_no_more(plugin: Row, builtin: Row) -> None:
    """Issue 29: no saving bought by hiding fresh results — no more files read that no request
    carried whole than the built-in (a real model would read them back and pay again)."""
    assert plugin.total("unseen") <= builtin.total("unseen"), _traces(
        "hidden: %s %d, %s %d" % (plugin.engine, plugin.total("unseen"), builtin.engine,
                                  builtin.total("unseen")), plugin, builtin)


def assert_hides_none(plugin: Row) -> None:
    """Issue 55: every file read reached the model whole in some request."""
    assert plugin.total("unseen") == 0, _traces("hidden: %s %d" % (plugin.engine, plugin.total("unseen")),
                                                plugin)


def assert_fair_baseline(rows: Mapping[str, Row], window: int) -> None:
    """The yardstick itself: every conversation offers >= 2 windows, the built-in answers
    every turn."""
    assert not rows["builtin"].failed, rows["builtin"].failed[:6]
    for row in rows.values():
        # A turn that failed offers nothing: the failures say why a conversation fell short.
        assert row.min_offered >= 2 * window, (row.engine, row.min_offered, row.failed[:6])


# The hosts issue 55's bars are for; older ones keep issue 29's bars.
ISSUE_55 = ("0.22",)


def for_issue_55(rows: Any) -> Any:
    """``rows`` where issue 55's bars apply; elsewhere the test asking skips."""
    if not (harness.hermes_version() or "").startswith(ISSUE_55):
        pytest.skip("issue 55's bars are for Hermes 0.22 (0.19 keeps the bars above)")
    return rows


def unmet_on(hosts: Sequence[str], reason: str, *, flaky: bool = False) -> Any:
    """A bar this branch does not meet yet on ``hosts`` (version prefixes): xfail there, strict
    so that it fails the day the bar holds; ``flaky`` when it was seen both met and unmet."""
    version = harness.hermes_version() or ""
    return pytest.mark.xfail(version.startswith(tuple(hosts)), strict=not flaky, reason=reason)


def median(values: Iterable[float]) -> float:
    values = list(values)
    return statistics.median(values) if values else 0.0
