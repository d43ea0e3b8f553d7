"""Disease recognition on the gold development splits: precision, recall and F1 (exact and overlapping spans)
per backend, and words per second with the model's load included, on this CPU.

Run: .venv/bin/python -m bench.ner [--backends trained mesh] [--ablations] [--tagger FOLDER]

`--tagger` scores another trained model folder as `trained`, such as one trained with `--splits train`, whose
development figures are held out (the shipped model is trained on the development splits too).

`--ablations` adds the trained tagger without its abbreviation pass, and with MeSH matches as a second opinion
(a MeSH match that overlaps no tagged mention is added), to show what each part contributes.
The test splits are never read here.
"""
from __future__ import annotations

import argparse
import time
from functools import lru_cache
from pathlib import Path

import bench.common  # noqa: F401  (puts the project on the path)
from fwsapp.entities.ner.evaluation import score_spans
from fwsapp.entities.ner.pubtator import CORPORA, corpus
from fwsapp.entities.recognizers import RECOGNIZERS, load_recognizer
from fwsapp.entities.recognizers.trained import TrainedRecognizer


@lru_cache(maxsize=None)
def recognizer(name: str, tagger: Path | None):
    return TrainedRecognizer(tagger) if name == "trained" and tagger else load_recognizer(name)


def tagger_only(tagger: Path | None):
    return lambda texts: recognizer("trained", tagger).tagger.predict(texts)


def with_mesh_second_opinion(tagger: Path | None):
    return lambda texts: _merged(recognizer("trained", tagger).find_many(texts), load_recognizer("mesh").find_many(texts))


def _merged(tagged, mesh) -> list[list[tuple[int, int]]]:
    merged = []
    for own, lexicon in zip(tagged, mesh):
        spans = [(e.start, e.end) for e in own]
        spans += [(e.start, e.end) for e in lexicon if not any(e.start < end and e.end > start for start, end in spans)]
        merged.append(sorted(spans))
    return merged


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backends", nargs="+", default=RECOGNIZERS.available())
    parser.add_argument("--ablations", action="store_true")
    parser.add_argument("--tagger", type=Path, help="a trained model folder to score as 'trained'")
    args = parser.parse_args()
    documents = {name: corpus(name, "dev") for name in CORPORA}
    words = sum(document.words for found in documents.values() for document in found)
    print(f"development splits: {', '.join(f'{name} {len(found)} documents' for name, found in documents.items())}; "
          f"{words} words")
    print("| recognizer | corpus | exact P | exact R | exact F1 | overlap P | overlap R | overlap F1 |")
    print("|---|---|---|---|---|---|---|---|")
    timings = {}
    variants = {name: None for name in args.backends}
    if args.ablations:
        variants.update({"trained, no abbreviation pass": tagger_only(args.tagger),
                         "trained + MeSH second opinion": with_mesh_second_opinion(args.tagger)})
    for name, predict in variants.items():
        started = time.perf_counter()
        if predict is None:
            backend = recognizer(name, args.tagger)
            loaded = time.perf_counter() - started
            predict = lambda texts, backend=backend: [[(e.start, e.end) for e in found]  # noqa: E731
                                                      for found in backend.find_many(texts)]
        else:
            loaded = 0.0
        tagging = 0.0
        for corpus_name, found in documents.items():
            started = time.perf_counter()
            predicted = predict([document.text for document in found])
            tagging += time.perf_counter() - started
            scores = score_spans(predicted, [list(document.mentions) for document in found])
            exact, overlap = scores["exact"], scores["overlap"]
            print(f"| {name} | {corpus_name} | {exact.precision:.3f} | {exact.recall:.3f} | {exact.f1:.3f} | "
                  f"{overlap.precision:.3f} | {overlap.recall:.3f} | {overlap.f1:.3f} |")
        timings[name] = (loaded, tagging)
    print()
    print("| recognizer | load (s) | tagging (s) | words/s, load included |")
    print("|---|---|---|---|")
    for name, (loaded, tagging) in timings.items():
        print(f"| {name} | {loaded:.1f} | {tagging:.1f} | {words / (loaded + tagging):,.0f} |")


if __name__ == "__main__":
    main()
