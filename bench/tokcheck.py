#!/usr/bin/env python3
"""Token estimate (tokens.estimate_text, used at runtime) against the o200k_base tokenizer.

Runs inside the bench venv (bpe-openai ships its vocabulary; the plugin never imports it).
Prints one JSON object: per class, the median and spread of (estimate - o200k) / o200k.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common  # noqa: E402
import samples  # noqa: E402


def main() -> int:
    import bpe_openai
    enc = bpe_openai.get_encoding("o200k_base")
    _common.load_plugin()
    from tencentdb_offload.context.tokens import estimate_text
    out = {"tokenizer": "bpe-openai %s o200k_base" % getattr(bpe_openai, "__version__", "?"),
           "classes": {}}
    for cls, texts in samples.all_samples().items():
        errs, chars, real_total, est_total = [], 0, 0, 0
        for t in texts:
            real = len(enc.encode(t))
            est = estimate_text(t)
            errs.append((est - real) / real * 100)
            chars += len(t)
            real_total += real
            est_total += est
        out["classes"][cls] = {
            "n": len(texts), "median_err_pct": statistics.median(errs),
            "p10_err_pct": sorted(errs)[len(errs) // 10], "p90_err_pct": sorted(errs)[len(errs) * 9 // 10],
            "min_err_pct": min(errs), "max_err_pct": max(errs),
            "chars_per_token": chars / real_total, "chars": chars, "o200k_tokens": real_total,
            "estimate_tokens": est_total}
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
