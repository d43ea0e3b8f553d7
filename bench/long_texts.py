"""Teacher forcing against text length: peak memory and time to read one text of 1k, 5k, 20k and 100k characters
with the embedded model (context 8,192 tokens; windows of 2,048), and the same with the windows, token budget and
sliced output layer turned off (the implementation before issue 25) as the baseline, in the same run.

Run: .venv/bin/python -m bench.long_texts [--lengths 1000 5000 20000 100000] [--baseline-max 20000]

Each measurement runs in a fresh process, so its peak resident memory (ru_maxrss) is its own; the model's load is
reported apart. The text is the paper's HealthQA reference answers joined until the length is reached.
"""
from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

from bench.common import PAPER_QA, ROOT


def text_of_length(characters: int) -> str:
    answers = [record["natural_text"] for record in json.loads(PAPER_QA.read_text())]
    text = ""
    while len(text) < characters:
        text += " ".join(answers)
    return text[:characters]


def measure(characters: int, bounded: bool) -> dict:
    """One teacher-forcing pass over the text (run in a child process)."""
    import fwsapp.models.teacher_forcing as forcing
    from fwsapp.models import load_model

    if not bounded:  # one window, one batch, the whole output layer at once
        forcing.MAX_WINDOW = forcing.BATCH_TOKENS = 10**9
        forcing.HEAD_VALUES = 10**15
    started = time.perf_counter()
    lm = load_model()
    loaded = time.perf_counter()
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    ids = lm.tokenizer(text_of_length(characters), add_special_tokens=False)["input_ids"]
    stats = forcing.teacher_force(lm, [(lm.tokenizer("Question:")["input_ids"], ids)], tuple(forcing.STATISTICS))[0]
    return {"characters": characters, "tokens": len(ids), "bounded": bounded, "scored": len(stats),
            "load_s": round(loaded - started, 2), "seconds": round(time.perf_counter() - loaded, 2),
            "peak_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
            "peak_after_load_mb": round(base / 1024)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--lengths", type=int, nargs="+", default=[1000, 5000, 20000, 100000])
    parser.add_argument("--baseline-max", type=int, default=20000, help="longest text the unbounded baseline reads")
    parser.add_argument("--child", nargs=2, metavar=("CHARACTERS", "BOUNDED"), help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.child:
        print(json.dumps(measure(int(arguments.child[0]), arguments.child[1] == "1")))
        return
    print("| characters | tokens | implementation | seconds | peak RSS (MB) | after load (MB) |")
    print("|---:|---:|---|---:|---:|---:|")
    for characters in arguments.lengths:
        for bounded in (True, False):
            if not bounded and characters > arguments.baseline_max:
                print(f"| {characters:,} | | unbounded | not run: its logits alone would need "
                      f"{characters // 4 * 49152 * 4 / 2**30:.0f}+ GB | | |")
                continue
            output = subprocess.run([sys.executable, "-m", "bench.long_texts", "--child", str(characters), str(int(bounded))],
                                    cwd=ROOT, capture_output=True, text=True, check=True).stdout
            row = json.loads(output.strip().splitlines()[-1])
            print(f"| {row['characters']:,} | {row['tokens']:,} | {'windowed' if bounded else 'unbounded'} | "
                  f"{row['seconds']} | {row['peak_mb']:,} | {row['peak_after_load_mb']:,} |", flush=True)


if __name__ == "__main__":
    main()
