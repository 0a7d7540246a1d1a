"""Retention against a wall clock that jumps: nothing this process wrote is deleted, and the
jump is reported."""

import time

from tencentdb_offload.archive.outbox import Outbox
from tencentdb_offload.archive.store import ArchiveItem, Store
from tencentdb_offload.runtime.reclaimer import Reclaimer
from helpers import count_archived


class Clocks:
    def __init__(self):
        self.wall0, self.jump, self.mono_s = time.time(), 0.0, 0.0

    def wall(self):
        return self.wall0 + self.mono_s + self.jump

    def mono(self):
        return 1000.0 + self.mono_s


def test_a_wall_clock_jump_of_31_days_deletes_nothing_just_recorded(tmp_path):
    st = Store(tmp_path)
    clocks = Clocks()
    rec = Reclaimer(st.reclaim, 30, wall=clocks.wall, mono=clocks.mono)
    old = clocks.wall0 - 40 * 86_400             # a previous process's row, really 40 days old
    st.transaction([Store.op_archive("s", [ArchiveItem("message", "old", role="user")], old)])
    assert rec.due()
    rec.run()
    assert count_archived(st, "s") == 0 and rec.clock_warning == ""
    for i in range(20):                           # recorded a moment ago, by the wall clock
        st.transaction([Store.op_archive("s", [ArchiveItem("message", "m%d" % i, role="user")],
                                         clocks.wall())])
    clocks.mono_s += 5.0
    clocks.jump = 31 * 86_400.0
    assert not rec.due()                          # a day of monotonic time has not passed
    rec.run()                                     # the slash command runs it at once
    assert count_archived(st, "s") == 20
    assert "wall clock moved +744.0 hours" in rec.clock_warning
    clocks.mono_s += 86_400.0                     # a real day later it is due again
    assert rec.due()
    rec.run()
    assert count_archived(st, "s") == 20           # still this process's rows


def test_rows_of_this_process_stay_even_past_the_retention(tmp_path):
    st = Store(tmp_path)
    clocks = Clocks()
    rec = Reclaimer(st.reclaim, 1, wall=clocks.wall, mono=clocks.mono)
    st.transaction([Store.op_archive("s", [ArchiveItem("message", "mine", role="user")],
                                     clocks.wall())])
    clocks.mono_s += 3 * 86_400.0                 # a long-running process
    rec.run()
    assert count_archived(st, "s") == 1 and rec.clock_warning == ""


def test_a_clock_set_back_is_reported_too(tmp_path):
    clocks = Clocks()
    rec = Reclaimer(lambda *a: {}, 30, wall=clocks.wall, mono=clocks.mono)
    clocks.jump = -2 * 3600.0
    rec.run()
    assert "moved -2.0 hours" in rec.clock_warning


def test_outbox_rows_retention_deletes_undelivered_are_said(tmp_path, caplog):
    """A Gateway down longer than the retention: its queued rows go, and the log says so."""
    st = Store(tmp_path)
    clocks = Clocks()
    rec = Reclaimer(st.reclaim, 30, wall=clocks.wall, mono=clocks.mono)
    old = clocks.wall0 - 40 * 86_400
    st.transaction([Outbox.op_enqueue("s", "prompt", {"prompt": "p"}, old),
                    Outbox.op_enqueue("s", "prompt", {"prompt": "q"}, old)])
    with caplog.at_level("WARNING", logger="tencentdb_offload"):
        rec.run()
    assert st.outbox.backlog() == 0
    assert "retention deleted 2 outbox rows older than 30 days that the Gateway never " \
           "received" in caplog.text
