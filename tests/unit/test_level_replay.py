"""A Gateway compaction whose only work was its fast path (earlier decisions replayed) is
recorded as level ``replay`` (docs/behaviour.md, "Levels in status"); the record read it as a
level it did not know, and status said "compacted through the Gateway (unknown)" and
"levels: unknown 1"."""

from tencentdb_offload.session.record import Compaction, Level, Route
from tencentdb_offload.memory_gateway.compaction import effective_level


def test_every_level_the_gateway_report_gives_is_known():
    reports = [{"fastPathReplaced": 2}, {"fastPathDeleted": 1}, {"mildReplacements": 1},
               {"aggressiveDeleted": 1}, {"emergencyDeleted": 1}, {"resolvedLevel": "mild"}, {}]
    for report in reports:
        assert Level.parse(effective_level(report)) is not Level.UNKNOWN, report


def test_a_replayed_compaction_reads_back_as_replay():
    rec = Compaction(route=Route.GATEWAY_THEN_LOCAL, level=Level.parse(effective_level(
        {"resolvedLevel": "mild", "fastPathReplaced": 3})), tokens_before=57_428,
        tokens_after=25_903, target=28_800, archived=12)
    back = Compaction.from_json(rec.to_json())
    assert back.level.value == "replay"
    assert "through the Gateway (replay), finished locally" in back.describe()
