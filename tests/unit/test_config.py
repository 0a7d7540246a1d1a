from tencentdb_offload.config import load_settings, redact


def test_defaults():
    s, warnings = load_settings({})
    assert warnings == []
    assert s.gateway_url == "http://127.0.0.1:8420" and s.api_key == "local"
    assert (s.compact_ratio, s.threshold, s.timeout_ms, s.ingest_timeout_ms) == (0.5, 0.75, 90000, 5000)
    assert s.instance_id == "default" and s.enabled


def test_bad_values_warn_and_use_defaults():
    env = {"TENCENTDB_OFFLOAD_THRESHOLD": "lots", "TENCENTDB_OFFLOAD_TIMEOUT_MS": "-5",
           "TENCENTDB_OFFLOAD_ENABLED": "maybe", "TENCENTDB_OFFLOAD_GATEWAY_URL": "ftp://x"}
    s, warnings = load_settings(env)
    assert s.threshold == 0.75 and s.timeout_ms == 90000 and s.enabled
    assert s.gateway_url == "" and not s.gateway_enabled    # never silently the default URL
    assert len(warnings) == 4
    joined = "\n".join(warnings)
    for name in ("TENCENTDB_OFFLOAD_THRESHOLD='lots'", "TENCENTDB_OFFLOAD_TIMEOUT_MS='-5'",
                 "TENCENTDB_OFFLOAD_ENABLED='maybe'", "TENCENTDB_OFFLOAD_GATEWAY_URL='ftp://x'"):
        assert name in joined
    assert "default 0.75" in joined


def test_ratio_must_end_below_threshold():
    s, warnings = load_settings({"TENCENTDB_OFFLOAD_COMPACT_RATIO": "0.8", "TENCENTDB_OFFLOAD_THRESHOLD": "0.6"})
    assert s.compact_ratio < s.threshold
    assert any("must be below" in w for w in warnings)


def test_api_key_never_shown():
    s, warnings = load_settings({"TENCENTDB_OFFLOAD_API_KEY": "   "})
    assert warnings and "(hidden)" in warnings[0]
    s, _ = load_settings({"TENCENTDB_OFFLOAD_API_KEY": "sekret-123"})
    assert "sekret" not in repr(s) and "sekret" not in str(s.public())
    assert redact("abc") == "(set, 3 chars)"


def test_off_and_yaml_block():
    s, _ = load_settings({"TENCENTDB_OFFLOAD_GATEWAY_URL": "off"})
    assert not s.gateway_enabled
    s, w = load_settings({}, {"threshold": 0.9, "compact_ratio": "0.4", "canvas": False})
    assert (s.threshold, s.compact_ratio, s.canvas) == (0.9, 0.4, False) and w == []
    s, _ = load_settings({"TENCENTDB_OFFLOAD_THRESHOLD": "0.8"}, {"threshold": 0.9})
    assert s.threshold == 0.8   # environment wins
