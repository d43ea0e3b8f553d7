"""`recognize` on many short lines: does the command hold the recognizer's own speed?

Run: .venv/bin/python -m bench.recognize_lines [--lines 20000] [--recognizer trained]
The lines are sentences of the paper's meditron QA generations (../shared/data/paper), repeated in order to the count
asked. Timed in one run:
- the command, `python -m fwsapp recognize --in lines.jsonl --out mentions.jsonl`, end to end in its own process (start,
  loading the recognizer, reading, writing);
- the baseline: the same texts through the loaded recognizer's `find_many` in one call, in this process, after
  loading it.
Printed: texts and words per second of each, and the command's share of the baseline's speed (its load taken out).
"""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import PAPER_QA, ROOT


def short_lines(count: int) -> list[str]:
    sentences = [sentence for record in json.loads(PAPER_QA.read_text())
                 for sentence in re.split(r"(?<=[.!?])\s+", record["watermarked_text"]) if len(sentence.split()) >= 3]
    return [sentences[index % len(sentences)] for index in range(count)]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lines", type=int, default=20_000)
    parser.add_argument("--recognizer", default="trained")
    args = parser.parse_args()
    texts = short_lines(args.lines)
    words = sum(len(text.split()) for text in texts)

    with tempfile.TemporaryDirectory() as folder:
        source, target = Path(folder) / "lines.jsonl", Path(folder) / "mentions.jsonl"
        source.write_text("".join(json.dumps({"text": text}) + "\n" for text in texts))
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "fwsapp", "recognize", "--in", str(source), "--out", str(target),
                        "--recognizer", args.recognizer], cwd=ROOT, check=True, capture_output=True)
        command = time.perf_counter() - started
        written = sum(1 for _ in target.open())
    assert written == len(texts)

    from fwsapp.entities.recognizers import load_recognizer

    started = time.perf_counter()
    recognizer = load_recognizer(args.recognizer)
    load = time.perf_counter() - started
    started = time.perf_counter()
    recognizer.find_many(texts)
    baseline = time.perf_counter() - started

    print(f"{len(texts):,} lines, {words:,} words, recognizer {args.recognizer}")
    print(f"command, end to end:        {command:6.1f} s  {len(texts) / command:7.0f} texts/s  {words / command:7.0f} words/s")
    print(f"baseline find_many, loaded: {baseline:6.1f} s  {len(texts) / baseline:7.0f} texts/s  {words / baseline:7.0f} words/s"
          f"  (load {load:.1f} s)")
    print(f"command without the load, against the baseline: {baseline / max(command - load, 1e-9):.2f}× its speed")


if __name__ == "__main__":
    main()
