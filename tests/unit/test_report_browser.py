"""``report``'s page in a real browser: headless Chromium renders it to a PNG that shows the
chart (request bars, the window line, compaction marks), not a blank page. Skips, saying why,
where no Chromium is installed (``python3 tests/run.py`` installs it where it can)."""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import zlib
from collections import Counter
from pathlib import Path
from typing import List, Tuple

import pytest

from report_page import demo_store

BROWSERS = ("chromium", "chromium-browser")
BAR = (0x4A, 0x78, 0xC2)          # a request's bar (report_html)
WINDOW = (0xC0, 0x39, 0x2B)       # the window line
MARK = (0x7A, 0x3F, 0xB0)         # a compaction's arrow


def browser() -> str:
    for name in BROWSERS:
        found = shutil.which(name)
        if found:
            return found
    pytest.skip(os.environ.get("TDO_NO_CHROMIUM") or "no chromium on PATH (Debian: apt-get "
                "install chromium; tests/run.py installs it when run as root)")


def pixels(png: Path) -> Tuple[int, int, List[Tuple[int, int, int]]]:
    """(width, height, RGB per pixel) of an 8-bit RGB or RGBA PNG, decoded with zlib only."""
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, head = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            head = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    width, height, depth, colour, _c, _f, interlace = head
    assert depth == 8 and colour in (2, 6) and interlace == 0, head
    step = 3 if colour == 2 else 4
    raw, stride, out = zlib.decompress(idat), width * step, []
    low, high = int.from_bytes(b"\x7f" * stride, "big"), int.from_bytes(b"\x80" * stride, "big")
    prev = bytearray(stride)
    for y in range(height):
        kind, row = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        if kind == 2:           # "up", most rows: a bytewise add without carries, in one go
            a, b = int.from_bytes(row, "big"), int.from_bytes(prev, "big")
            row = bytearray((((a & low) + (b & low)) ^ ((a ^ b) & high)).to_bytes(stride, "big"))
        elif kind:
            unfilter(row, prev, kind, step)
        out += [tuple(row[i:i + 3]) for i in range(0, stride, step)]
        prev = row
    return width, height, out


def unfilter(row: bytearray, prev: bytearray, kind: int, step: int) -> None:
    """PNG filters 1 (sub), 3 (average), 4 (Paeth), in place."""
    for i in range(len(row)):
        a = row[i - step] if i >= step else 0
        b, c = prev[i], prev[i - step] if i >= step else 0
        p = a + b - c
        pred = (a if abs(p - a) <= abs(p - b) and abs(p - a) <= abs(p - c)
                else b if abs(p - b) <= abs(p - c) else c)
        row[i] = (row[i] + (0, a, b, (a + b) // 2, pred)[kind]) & 0xFF


def near(colour: Tuple[int, int, int], want: Tuple[int, int, int]) -> bool:
    return all(abs(a - b) <= 8 for a, b in zip(colour, want))


def test_chromium_renders_the_chart(tmp_path):
    exe = browser()
    made = demo_store(tmp_path)
    png = tmp_path / "page.png"
    cmd = [exe, "--headless", "--disable-gpu", "--hide-scrollbars", "--window-size=1100,1000",
           "--screenshot=%s" % png, made["page"].resolve().as_uri()]
    if os.geteuid() == 0:
        cmd.insert(1, "--no-sandbox")          # Chromium refuses root without it
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, HOME=str(tmp_path)))
    assert proc.returncode == 0 and png.exists(), proc.stderr[-2000:]
    width, height, px = pixels(png)
    assert (width, height) == (1100, 1000)
    colours = Counter(px)
    assert len(colours) > 50, "a blank or nearly blank page: %d colours" % len(colours)
    assert colours[(255, 255, 255)] < 0.9 * len(px)
    for name, want, least in (("request bars", BAR, 5000), ("window line", WINDOW, 500),
                              ("compaction marks", MARK, 50)):
        seen = sum(n for colour, n in colours.items() if near(colour, want))
        assert seen >= least, "%s: %d pixels of their colour" % (name, seen)
