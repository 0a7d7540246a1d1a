"""The Gateway's /compact reply is taken only where it lands at least as deep as the local plan
(issue 55: the real Gateway's replies landed higher, 0.76 of the window against 0.71, and its
arm cost 1.06x the one without a Gateway: a higher landing is read by every later request
and leaves less room before the next rewrite). A shallower reply is finished locally, as deep
as the local plan; its L1 summaries are kept either way."""

from fakes.gateway import FakeGateway
from tencentdb_offload.context import messages
from tencentdb_offload.context.departures import OFFLOADED_MARK
from tencentdb_offload.context.tokens import messages_tokens

from helpers import conversation, make_engine

WINDOW = 64_000
SHALLOW = 20_000        # tokens: under the landing (0.45 of 64K), above where ours lands


def shallow(msgs):
    """A well-formed reply that summarises every tool result but keeps them long: it fits the
    target, and lands higher than the local compaction of the same list."""
    chars = 4_000
    while True:
        out = [dict(m, content="%s | node: N/A]\nSummary: summary of %s: %s" % (
                   OFFLOADED_MARK, m["tool_call_id"], str(m["content"])[:chars]))
               if messages.role(m) == "tool" else m for m in msgs]
        if messages_tokens(out) <= SHALLOW or chars < 100:
            return out
        chars = int(chars * 0.9)


def compact(tmp_path, before, gateway=None):
    extra = dict(gateway_url=gateway.url, api_key="k") if gateway else {}
    rt, eng = make_engine(tmp_path, context_length=WINDOW, **extra)
    out = eng.compress(before, current_tokens=messages_tokens(before))
    state = eng.current_state()
    summaries = dict(state.summaries)
    rt.close()
    assert messages.validation_errors(out) == []
    return out, summaries


def test_a_shallow_gateway_reply_lands_no_higher_than_the_local_plan(tmp_path):
    before = conversation(10, 9_000, calls=2)
    local, _ = compact(tmp_path / "local", before)
    with FakeGateway(api_key="k") as gw:
        gw.tamper = shallow
        via, summaries = compact(tmp_path / "gateway", before, gw)
        (_request, reply), = gw.compact_calls()
    # the case: the reply fits the target, above where the local plan lands
    assert messages_tokens(local) < messages_tokens(reply["messages"]) <= SHALLOW
    assert messages_tokens(via) <= messages_tokens(local)
    assert summaries, "the Gateway's L1 summaries are kept"
