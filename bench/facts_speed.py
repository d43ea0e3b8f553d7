"""How fast clinical facts are found and compared, on the paper's 7B answers (meditron QA and completion, trimmed to
about 200 words each).

Run: .venv/bin/python -m bench.facts_speed [--pairs 300]

1. `facts` on pairs (a watermarked answer against its unwatermarked twin): seconds per 1,000 pairs, with the default
   recognizers (the trained disease and chemical taggers) and with the model-free ones (MeSH, the drug lexicon).
2. `analyze` on an imported run: every kind's facts and changes against today's disease analysis, the ratio.
3. The clinical_facts metric's cost in seconds per 1,000 characters of a sample's texts (its registry entry).
4. Each chemical recognizer's words per second on BC5CDR's development abstracts.
5. The taggers' floor: the arithmetic their encoder does per word, the rate it does it at, and this CPU's own
   matrix-multiply rate, so the least time any engineering of today's taggers could take on this machine.
Each recognizer is loaded and warmed before it is timed.
"""
from __future__ import annotations

import argparse
import json
import time

from bench.common import ROOT
from fwsapp.data.tasks import strip_prompt
from fwsapp.entities.changes import changes
from fwsapp.entities.facts import FactFinder
from fwsapp.entities.recognizers import load_recognizer

PAPER = ROOT.parent / "shared" / "data" / "paper"
WORDS = 200


def answers(pairs: int) -> list[tuple[str, str, str]]:
    """(watermarked, unwatermarked, reference), each answer cut to its first WORDS words."""
    found = []
    for log in ("HQA2", "HQA"):
        for record in json.loads((PAPER / f"KGW-g0.5-d2-meditron-{log}.generations.json").read_text()):
            w, u = (" ".join(strip_prompt(record[key], record["prompt"]).split()[:WORDS])
                    for key in ("watermarked_text", "unwatermarked_text"))
            found.append((w, u, record["natural_text"]))
    return (found * (1 + pairs // len(found)))[:pairs]


def timed(function) -> float:
    started = time.perf_counter()
    function()
    return time.perf_counter() - started


def facts_of_pairs(finder: FactFinder, pairs: list[tuple[str, str, str]]) -> None:
    found = finder.find_many([w for w, _, _ in pairs] + [u for _, u, _ in pairs])
    for index, (w, u, _) in enumerate(pairs):
        changes(w, found[index], u, found[len(pairs) + index])


def analyses(samples: int) -> None:
    """`analyze`'s two stages on one imported run of the paper's meditron QA answers: today's disease analysis
    (entities, introduced and unsupported, with span embeddings) against every kind's facts and their changes."""
    import tempfile
    from pathlib import Path

    from bench.common import paper_qa_run
    from fwsapp.entities.fact_analysis import analyze_run_facts
    from fwsapp.entities.introduced import analyze_run
    from fwsapp.models.encoder import load_encoder
    from fwsapp.store import Store

    with tempfile.TemporaryDirectory() as folder:
        store = Store(Path(folder) / "bench.duckdb")
        run_id = paper_qa_run(store, samples)
        recognizer, encoder, finder = load_recognizer("trained"), load_encoder(), FactFinder()
        finder.find_many(["Warm 500 mg of ibuprofen for asthma."])  # loads every recognizer
        entities = timed(lambda: analyze_run(store, run_id, recognizer, encoder))
        facts = timed(lambda: analyze_run_facts(store, run_id, finder))
        print(f"analyze, {samples} samples ({3 * samples} texts): disease entities {entities:.1f} s, clinical facts "
              f"{facts:.1f} s ({facts / entities:.2f}x)")


def recognition_speed() -> None:
    """Words per second of each chemical recognizer on BC5CDR's development abstracts, loaded and warmed first."""
    from fwsapp.entities.ner.pubtator import corpus

    texts = [document.text for document in corpus("bc5cdr", "dev", "chemical")]
    words = sum(len(text.split()) for text in texts)
    for name in ("chemical-tagger", "drug-lexicon"):
        recognizer = load_recognizer(name)
        recognizer.find_many(texts[:4])
        seconds = timed(lambda: recognizer.find_many(texts))
        print(f"{name}: {words / seconds:,.0f} words/s on BC5CDR dev ({words:,} words)")


def encoder_floor(pairs: list[tuple[str, str, str]]) -> None:
    """FLOPs of a tagger's encoder over the answers' windows (as `MentionTagger.predict` batches them, padding
    included), the rate it runs them at, and torch's rate on one large matrix product (best of 3): both taggers'
    encoder time for 1,000 pairs of WORDS-word answers, as measured and at the machine's own peak."""
    import torch

    tagger = load_recognizer("chemical-tagger").tagger
    texts = [text for w, u, _ in pairs for text in (w, u)]
    batches = [inputs for _, inputs in tagger.batches(texts)[1]]
    config = tagger.model.encoder.config
    dense = sum(module.weight.numel() for module in tagger.model.modules() if isinstance(module, torch.nn.Linear))
    flops = 0.0
    for batch in batches:  # 2 per linear weight and position, and attention's two products (scores, then values)
        rows, length = batch["input_ids"].shape
        flops += rows * length * (2 * dense + 4 * config.num_hidden_layers * length * config.hidden_size)
    with torch.inference_mode():
        tagger.model(**batches[0])
        seconds = min(timed(lambda: [tagger.model(**batch) for batch in batches]) for _ in range(3))
    square = torch.randn(4096, 4096)
    torch.mm(square, square)
    peak = 2 * 4096 ** 3 / min(timed(lambda: torch.mm(square, square)) for _ in range(3))
    words = sum(len(text.split()) for text in texts)
    needed = 2 * flops / words * 1000 * 2 * WORDS  # two taggers, each over both answers of 1,000 pairs
    print(f"taggers' floor: {flops / words / 1e6:.1f} MFLOP per word per tagger ({len(batches)} batches), the encoder "
          f"at {flops / seconds / 1e9:.0f} GFLOP/s, torch's 4096x4096 product at {peak / 1e9:.0f} GFLOP/s "
          f"({torch.get_num_threads()} threads): both taggers on 1,000 pairs of {WORDS}-word answers "
          f"{needed / 1e12:.1f} TFLOP, {needed / (flops / seconds):.0f} s as measured, {needed / peak:.0f} s at that peak")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=300)
    parser.add_argument("--samples", type=int, default=200, help="samples of the run `analyze` is timed on")
    args = parser.parse_args(argv)
    pairs = answers(args.pairs)
    words = sum(len(w.split()) + len(u.split()) for w, u, _ in pairs)
    print(f"{len(pairs)} pairs, {words / (2 * len(pairs)):.0f} words per answer")
    for label, chosen in (("default (trained taggers)", {}),
                          ("model-free (MeSH, drug lexicon)", {"disease": "mesh", "chemical": "drug-lexicon"})):
        finder = FactFinder(chosen)
        facts_of_pairs(finder, pairs[:8])  # loads and warms every recognizer
        seconds = timed(lambda: facts_of_pairs(finder, pairs))
        print(f"facts, {label}: {seconds:.1f} s, {1000 * seconds / len(pairs):.0f} s per 1,000 pairs, "
              f"{words / seconds:,.0f} words/s")
    analyses(args.samples)
    recognition_speed()
    from fwsapp.quality.clinical_facts import ClinicalFacts
    from fwsapp.quality.registry import METRICS
    from fwsapp.quality.scoring import QualityResources

    metric, resources = ClinicalFacts(METRICS["clinical_facts"]), QualityResources(model_loader=None)
    sample = pairs[:100]
    characters = sum(len(w) + len(u) + len(r) for w, u, r in sample)

    def score():  # as ReferenceMetric.rows calls it: chunks of 16 samples, each kind against the references
        for start in range(0, len(sample), 16):
            chunk = sample[start:start + 16]
            for side in (0, 1):
                metric.values([row[side] for row in chunk], [row[2] for row in chunk], resources)

    seconds = timed(score)
    print(f"clinical_facts: {seconds:.1f} s for {len(sample)} samples, {1000 * seconds / characters:.3f} s per 1,000 "
          "characters of a sample's texts")
    encoder_floor(pairs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
