"""End-to-end: a compacted prefix survives the next process byte for byte (issue 55).

One ``hermes chat -q`` process per turn (``--resume`` the id the last turn printed): each
process reloads the conversation from Hermes' session store. After a turn that compacted,
the next turn's first request must start with exactly the messages (after the system prompt)
of the compacted turn's last request: anything else is a full prompt-cache break that saves
nothing. On Hermes 0.17 it did not: 0.17 reloads a session ordered by each message's
timestamp, and the digest pair a compaction put after the first user message (no timestamp
of its own: the time of the write) came back behind the kept messages that carry their
original ones; position 2 then held the original first tool call instead of the digest.

The workload is the CLI side-by-side's (three ~25 KB reads per turn, 64K window), one turn
longer, so that the local compaction that cuts turns (and writes the digest) keeps older,
trimmed turns after the digest; without a Gateway and, where it is beside the checkout, with
the real TencentDB Gateway.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Dict, List

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402
import real_gateway  # noqa: E402
from tests.fakes.fake_llm import FakeLLM, request_units  # noqa: E402

CONTEXT, READS, TURNS = 64000, 3, 8
HOSTS = ("0.17", "0.19", "0.22")

if not harness.hermes_bin().exists():  # pragma: no cover - wrong interpreter
    pytest.skip(f"hermes CLI not found next to {sys.executable}; run tests/e2e with the "
                "Hermes venv's python", allow_module_level=True)


def _after_system(body: Dict) -> List[tuple]:
    """The request's messages after the system prompt, as the provider's cache sees them."""
    return [u for u in request_units(body) if u[0][0] == "message" and u[0][1] != "system"]


def _run(engine: str, tmp: Path, gateway_url: str = "off") -> harness.Conversation:
    supply = harness.FileSupply(tmp / "files", tag="pfx")
    with FakeLLM() as llm:
        home = harness.make_home(tmp, llm.url, context_length=CONTEXT,
                                 env={"TENCENTDB_OFFLOAD_GATEWAY_URL": gateway_url})
        conv = harness.Conversation(llm, home, timeout=300)
        for _ in range(TURNS):
            conv.say("DO read " + " ".join(p for p, _ in supply.take(READS)))
    return conv


@pytest.fixture(scope="module")
def conversations(tmp_path_factory):
    problem = harness.plugin_problem()
    if problem:
        pytest.fail(problem)
    return real_gateway.at_once_with_gateway(_run, {"plugin": ("plugin", tmp_path_factory.mktemp("pfx"))},
                                             tmp_path_factory, HOSTS)


def _breaks(conv: harness.Conversation) -> List[str]:
    """Every turn after a compaction whose first request does not start with the compacted
    turn's last request."""
    compacted = conv.compactions_by_turn()
    out = []
    for turn, nxt in zip(conv.turns, conv.turns[1:]):
        if turn.number not in compacted or not turn.main or not nxt.main:
            continue
        last, first = _after_system(turn.main[-1].body), _after_system(nxt.main[0].body)
        if first[:len(last)] != last:
            at = next(i for i, (a, b) in enumerate(zip(last + [None], first + [None])) if a != b)
            out.append("turn %d -> %d: message %d was %r, now %r" % (
                turn.number, nxt.number, at + 1, _short(last, at), _short(first, at)))
    return out


def _short(units: List[tuple], at: int) -> str:
    return "%s %s" % (units[at][0][1], units[at][1][:90]) if at < len(units) else "(none)"


def test_compacted_prefix_stable_across_processes(conversations):
    conv = conversations["plugin"]
    assert conv.compactions_by_turn(), "the workload made no compaction:\n" + conv.summary()
    breaks = _breaks(conv)
    assert not breaks, "\n".join(breaks) + "\n" + conv.summary()


def test_compacted_prefix_stable_across_processes_real_gateway(conversations):
    conv = real_gateway.arm(conversations, HOSTS)
    breaks = _breaks(conv)
    assert not breaks, "\n".join(breaks) + "\n" + conv.summary()
