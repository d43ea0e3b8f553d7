"""Tiny random-weight models with the paper's architectures and real tokenizers, saved as model folders.

- `meditron`: Llama with a 32,000-piece sentencepiece tokenizer (Meditron-7B's shape; Llama-2's own tokenizer is
  not on PyPI, so Mistral v0.1's 32,000-piece sentencepiece model stands in);
- `biomistral`: Mistral with `mistral-v1`, BioMistral-7B's own tokenizer;
- `jsl`: Llama with the 128,256-token `llama-3` BPE and no pad token (JSL-MedLlama-3-8B).

The weights are random but shaped so that the model is a bigram model over whole lower-case words: every token
embedding carries a constant first dimension, and the output layer reads it as a large penalty on every token that
is not a whole word. Generated texts then decode and re-encode to the same ids, as a real model's usually do, so
detection from the text alone can be compared with detection at generation time.
"""
from __future__ import annotations

import re
import shutil
from pathlib import Path

SHAPES = ("meditron", "biomistral", "jsl")
WORD = {"sentencepiece": re.compile(r"^▁[a-z]{3,}$"), "bpe": re.compile(r"^Ġ[a-z]{3,}$")}
HIDDEN = 32


def stand_in_filler(masked: list[str]) -> list[str]:
    """DetectGPT's perturbations need a T5 mask-filling model, which no PyPI wheel ships: this stand-in fills each
    masked span with one word, and the scoring model scores the perturbed texts as it would T5's."""
    return [re.sub(r"<extra_id_\d+>", "word", text) for text in masked]


def tokenizer_for(shape: str, folder: Path):
    """The shape's real tokenizer, as a transformers tokenizer saved the way a model folder holds it."""
    from transformers import AutoTokenizer

    from fwsapp.models import package_folder
    from fwsapp.models.tokenizers import llama_3_huggingface

    if shape == "jsl":
        return llama_3_huggingface(bos_token="<|begin_of_text|>", eos_token="<|end_of_text|>"), "bpe"
    source = folder.with_name(folder.name + ".sentencepiece")
    source.mkdir(parents=True, exist_ok=True)
    shutil.copy(package_folder("mistral_common") / "data" / "tokenizer.model.v1", source / "tokenizer.model")
    (source / "tokenizer_config.json").write_text(
        '{"tokenizer_class": "LlamaTokenizer", "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}')
    return AutoTokenizer.from_pretrained(source), "sentencepiece"


def build(shape: str, folder: Path) -> Path:
    """Save a tiny model of `shape` with its tokenizer in `folder`; returns the folder."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, MistralConfig, MistralForCausalLM

    tokenizer, kind = tokenizer_for(shape, folder)
    vocabulary = len(tokenizer)
    common = dict(vocab_size=vocabulary, hidden_size=HIDDEN, intermediate_size=64, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=False,
                  bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id)
    if shape == "biomistral":
        model = MistralForCausalLM(MistralConfig(max_position_embeddings=32768, sliding_window=4096, **common))
    else:
        model = LlamaForCausalLM(LlamaConfig(max_position_embeddings=8192 if shape == "jsl" else 4096,
                                             rope_theta=500000.0 if shape == "jsl" else 10000.0, **common))
    words = torch.zeros(vocabulary, dtype=torch.bool)
    for token, index in tokenizer.get_vocab().items():
        words[index] = bool(WORD[kind].match(token))
    generator = torch.Generator().manual_seed(sum(map(ord, shape)))
    with torch.no_grad():
        embeddings = torch.randn(vocabulary, HIDDEN, generator=generator) * 0.3
        embeddings[:, 0] = 1.0
        model.get_input_embeddings().weight.copy_(embeddings)
        head = torch.randn(vocabulary, HIDDEN, generator=generator) * 0.25
        head[:, 0] = 0.0
        head[~words] = 0.0
        head[~words, 0] = -5.0
        model.get_output_embeddings().weight.copy_(head)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder
