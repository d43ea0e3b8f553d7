"""fwsapp's SemStamp against MarkLLM's own SemStamp code (issue 49), where a MarkLLM checkout is at hand.

Run: .venv/bin/python -m bench.semstamp_oracle --markllm PATH/TO/MarkLLM [--db cache/bench-forgery.duckdb] [--prompts 4]

MarkLLM's `watermark/semstamp/semstamp.py` (not shipped in markllm 0.1.5, so read from a checkout) runs here offline:
nearpy must be importable (it is on PyPI, with bitarray and future); what needs a download gets a stand-in, the same
for both sides: the shipped MiniLM for its SBERT, fwsapp's Punkt rules for nltk's trained sent_tokenize, and empty
classes for the MarkLLM modules it imports only to subclass or annotate (its base and transformers config).
1. MarkLLM's detector scores every stored SemStamp text of the database; its z is compared with the stored one.
2. MarkLLM's generator writes answers to demo QA prompts with the embedded model (its generator runs OPT models only,
   so the model's name is given an "opt" prefix); fwsapp's detector and MarkLLM's score each answer.
"""
from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import json
import sys
import time
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def markllm_semstamp(checkout: Path, encoder):
    """MarkLLM's semstamp module, loaded from the checkout with the stand-ins in place."""
    import nltk.tokenize

    from fwsapp.watermark.semantic import sentence_spans

    class SentenceTransformer:
        def __init__(self, *args, **kwargs):
            pass

        def encode(self, sentences, batch_size=1, **kwargs):
            return encoder.encode(list(sentences))

        def get_sentence_embedding_dimension(self):
            return encoder.encode(["a"]).shape[1]

        def eval(self):
            return self

    dimension = SentenceTransformer().get_sentence_embedding_dimension()
    models = types.SimpleNamespace(Transformer=lambda path: types.SimpleNamespace(
        get_word_embedding_dimension=lambda: dimension), Pooling=lambda *args, **kwargs: None)
    sys.modules["sentence_transformers"] = types.SimpleNamespace(SentenceTransformer=SentenceTransformer, models=models)
    nltk.tokenize.sent_tokenize = lambda text: [text[start:end] for start, end in sentence_spans(text)]
    for name, module in {"markllm_watermark": types.ModuleType("markllm_watermark"),
                         "markllm_watermark.semstamp": types.ModuleType("markllm_watermark.semstamp"),
                         "markllm_watermark.base": types.SimpleNamespace(BaseWatermark=object, BaseConfig=object),
                         "utils": types.ModuleType("utils"),
                         "utils.transformers_config": types.SimpleNamespace(TransformersConfig=object)}.items():
        sys.modules[name] = module
    sys.modules["markllm_watermark"].__path__ = []
    sys.modules["markllm_watermark.semstamp"].__path__ = []
    spec = importlib.util.spec_from_file_location("markllm_watermark.semstamp.semstamp",
                                                  checkout / "watermark" / "semstamp" / "semstamp.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def oracle(module, params: dict, lm=None):
    """MarkLLM's SemStamp with fwsapp's parameters (its config set directly, not read from its JSON file)."""
    config = module.SemStampConfig.__new__(module.SemStampConfig)
    config.device, config.path_to_embedder = "cpu", "the shipped MiniLM"
    config.N_max, config.gamma, config.margin_m = params["max_rejections"], params["gamma"], params["margin"]
    config.dimension_d, config.prime_P, config.threshold = params["lsh_dim"], params["key"], params["z_threshold"]
    config.max_new_tokens, config.min_new_tokens = 64, 1
    if lm is not None:
        config.generation_model, config.generation_tokenizer = lm.model, lm.tokenizer
    return module.SemStamp(config)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--markllm", type=Path, required=True, help="a MarkLLM checkout (github.com/THU-BPM/MarkLLM)")
    parser.add_argument("--db", default=str(ROOT / "cache" / "bench-forgery.duckdb"))
    parser.add_argument("--prompts", type=int, default=4)
    args = parser.parse_args()

    import torch

    from fwsapp.data.loaders import DEMO, load_dataset
    from fwsapp.models import load_model
    from fwsapp.models.encoder import load_encoder
    from fwsapp.models.tokenizers import from_huggingface
    from fwsapp.store import Store
    from fwsapp.watermark.factory import create
    from fwsapp.watermark.semantic import sentence_spans

    module = markllm_semstamp(args.markllm, load_encoder())
    lm = load_model()
    tokenizer = from_huggingface("embedded", lm.tokenizer)
    quiet = lambda: contextlib.redirect_stdout(io.StringIO())  # noqa: E731 (its progress prints)

    store = Store(args.db, read_only=True)
    runs = store.runs().query("method == 'SemStamp'")
    gaps = []
    for run in runs.itertuples():
        params = create("SemStamp", lm.vocab_size, json.loads(run.params), tokenizer=tokenizer).params
        theirs = oracle(module, params)
        stored = store.detections([run.run_id]).set_index(["sample_idx", "text_kind"]).score
        for row in store.generations(run.run_id).itertuples():
            for kind in ("watermarked", "unwatermarked"):
                text = getattr(row, f"{kind}_text")
                if len(sentence_spans(text)) >= 2:  # MarkLLM's z divides by zero on one sentence
                    with quiet():
                        gaps.append(abs(theirs.detect_watermark(text)["score"] - stored[(row.sample_idx, kind)]))
    print(f"detector: {len(gaps)} stored texts of {len(runs)} SemStamp runs; "
          f"largest |z MarkLLM - z fwsapp| = {max(gaps, default=float('nan')):.2e}")

    lm.model.config._name_or_path = "opt-stand-in/" + lm.model.config._name_or_path
    ours = create("SemStamp", lm.vocab_size, {"max_rejections": 20}, lm=lm)
    detector, generator = oracle(module, ours.params), oracle(module, ours.params, lm)
    torch.manual_seed(0)
    print("| prompt | sentences | z MarkLLM | z fwsapp | seconds |\n|---|---|---|---|---|")
    for index, sample in enumerate(load_dataset("qa", DEMO)[:args.prompts]):
        started = time.time()
        with quiet():
            text = generator.generate_watermarked_text(sample.prompt)
            theirs = detector.detect_watermark(text)["score"]
        mine = ours.detect(lm.tokenizer(text, add_special_tokens=False)["input_ids"]).score
        print(f"| {index} | {len(sentence_spans(text))} | {theirs:.3f} | {mine:.3f} | {time.time() - started:.0f} |",
              flush=True)


if __name__ == "__main__":
    main()
