"""A compaction that replaces an older digest pair checks only the keys the archive keeps: the
digest itself is never archived (what it names is, by their own keys), so asking the store
for it made a later compaction's folded-range line say "it may not hold them all (it could
not be written)" on a healthy disk (seen as a flake of the long-session property under load)."""

from tencentdb_offload.compaction import durable
from tencentdb_offload.context.departures import Departed, Departures
from tencentdb_offload.context.provenance import Seal
from tencentdb_offload.context.sealed import SealedWork


def test_an_older_digest_that_left_is_not_a_key_the_archive_must_hold():
    seal = Seal(b"k" * 32)
    digest_text = seal.seal_text("digest", "Digest of earlier turns.\n#1-12 folded")
    gone = Departures(
        items=[Departed("tool_result", digest_text, "tdo_digest_1", "", "tool"),
               Departed("tool_result", "a real result", "call_7", "read_file", "tool"),
               Departed("message", "a user's question", role="user")],
        left_ids={"tdo_digest_1", "call_7"}, summarised_ids=set(), count=3)
    keys = durable.named(gone, set(), [], SealedWork(seal))
    assert "tdo_digest_1" not in keys
    assert "call_7" in keys and any(k.startswith("msg-") for k in keys)


def test_a_trim_that_left_still_asks_for_its_original():
    """A sealed trim's original is kept under the trim's id: on a full disk it may be
    missing, and marks naming it must then say so."""
    seal = Seal(b"k" * 32)
    stand_in = seal.seal_text("trim", "first lines of call_3 … tdai_read_cos(call_3)")
    gone = Departures(items=[Departed("tool_result", stand_in, "call_3", "read_file", "tool")],
                      left_ids={"call_3"}, summarised_ids=set(), count=1)
    assert "call_3" in durable.named(gone, set(), [], SealedWork(seal))
