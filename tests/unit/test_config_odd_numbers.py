"""YAML numbers in the config block that are no setting's value (``.nan``, ``.inf``, ``1.0e+30``,
a 23-digit integer) were refused as "must be a single value, not a float" (or "not a int"):
they are single values. Now the setting's own parser says what is wrong, as for the same text
in .env."""

import pytest

from tencentdb_offload.settings.config import Settings, load_settings


@pytest.mark.parametrize("attr, raw, why", [
    ("threshold", float("nan"), "must be above 0 and below 1"),
    ("compact_ratio", float("inf"), "must be above 0 and below 1"),
    ("trim_chars", 1e30, "must be a whole number"),
    ("keep_first", 10 ** 22, "is a number far too large"),
])
def test_an_odd_yaml_number_gets_its_real_reason(attr, raw, why):
    settings, warnings = load_settings({}, {attr: raw})
    assert getattr(settings, attr) == getattr(Settings(), attr)
    mine = [w for w in warnings if w.startswith("tencentdb_offload.%s=" % attr)]
    assert mine and why in mine[0] and "single value" not in mine[0], warnings


def test_an_ordinary_yaml_number_still_works():
    settings, warnings = load_settings({}, {"threshold": 0.6, "trim_chars": 3000})
    assert (settings.threshold, settings.trim_chars) == (0.6, 3000) and not warnings


@pytest.mark.parametrize("name, raw", [("THRESHOLD", "1"), ("COMPACT_RATIO", "0")])
def test_an_end_of_the_range_is_not_said_to_be_inside_it(name, raw):
    """THRESHOLD=1 was refused as "must be between 0 and 1": both ends are excluded."""
    _s, warnings = load_settings({"TENCENTDB_OFFLOAD_" + name: raw})
    assert "must be above 0 and below 1" in warnings[0] and "between" not in warnings[0], warnings
