"""False positives under many keys on human text (issue 60, item 4): the key audit of `detect --audit-keys`.

Run: .venv/bin/python -m bench.key_audit [--per-task 100] [--keys 10] [--methods vLLM-Gumbel KGW SynthID]
The human sets are bench/deduplication_fpr.py's (the three tasks' references, and the repetitive "sentence ×" and
"template" sets built from them), under the embedded model's tokenizer, each text cut to 200 tokens. For each method at
its defaults, `fwsapp.detection.key_audit.audit` detects every set under the default key and `--keys` − 1 drawn ones,
with and without deduplication. Printed: per set and deduplication setting, the FPR at p < 1 % pooled over keys and
the worst key's, the share of keys whose Kolmogorov–Smirnov test rejects uniform p-values at 1 %, and the Bonferroni
threshold; a Markdown table for docs/benchmarks.md.
"""
from __future__ import annotations

import argparse

import numpy as np

from bench.deduplication_fpr import TOKENS, human_sets
from fwsapp.detection.key_audit import audit
from fwsapp.models import EMBEDDED_MODEL


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--per-task", type=int, default=100)
    parser.add_argument("--keys", type=int, default=10)
    parser.add_argument("--methods", nargs="+", default=["vLLM-Gumbel", "KGW", "SynthID", "EXP"])
    args = parser.parse_args(argv)
    from fwsapp.models.tokenizers import load_tokenizer

    tokenizer = load_tokenizer(EMBEDDED_MODEL)
    sets = {name: [(ids[:TOKENS], []) for ids in tokenizer.encode_many(texts)]
            for name, texts in human_sets(args.per_task).items()}
    print(f"| method | human texts | texts | repeats | FPR at p < 1 %, {args.keys} keys pooled | worst key | keys whose "
          "p-values are not uniform (KS p < 0.01) | Bonferroni threshold for 1 % |")
    print("|---|---|---:|---|---|---|---|---|")
    for method in args.methods:
        for name, texts in sets.items():
            found = audit(method, {}, texts, tokenizer.vocab_size, args.keys, seed=0)
            for setting, rows in found.table.groupby("deduplication", sort=False):
                false, total = int(rows["false_0.01"].sum()), int(rows.texts.sum())
                worst = rows.loc[rows["false_0.01"].idxmax()]
                low, high = worst["fpr_0.01_interval"]
                not_uniform = int((rows.ks_p < 0.01).sum())
                print(f"| {method} | {name} | {int(rows.texts.iloc[0])} | {setting} | {false / total:.2%} | "
                      f"{worst['fpr_0.01']:.1%} ({low:.1%}–{high:.1%}) | {not_uniform} of {len(rows)} | "
                      f"{found.bonferroni[0.01]:.2g} |", flush=True)
    return 0


if __name__ == "__main__":
    np.seterr(all="ignore")
    raise SystemExit(main())
