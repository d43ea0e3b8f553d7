"""Tokenizers for detection, by name: the paper's, offline from PyPI wheels, or any Hugging Face id or path.

Detection needs the generator's tokenizer, not its weights, so the paper's texts can be checked offline:
- `mistral-v1`: BioMistral-7B and Mistral-7B v0.1, the sentencepiece model `tokenizer.model.v1` inside the
  `mistral-common` wheel, used through sentencepiece itself (the fast tokenizer differs on double spaces).
- `llama-3`: JSL-MedLlama-3-8B, the tiktoken BPE file `llama3/tokenizer.model` inside the `llama-models`
  wheel, converted once with Llama 3's split pattern and its 256 special tokens (vocabulary 128,256).
Both wheels are installed with --no-deps and never imported: only their files are read.

Encoding adds no special tokens, as MarkLLM's detection does.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Callable

from fwsapp.models import EMBEDDED_MODEL, ModelLoadError, package_folder
from fwsapp.paths import CACHE_DIR

# English prose is about 4 characters a token in these BPE and sentencepiece vocabularies: the rough count a plan
# gives before any tokenizer is loaded (a judge's prompts, the texts perplexity will read).
CHARS_PER_TOKEN = 4
LLAMA3_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
LLAMA3_SPECIAL = [
    "<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>", "<|reserved_special_token_1|>",
    "<|finetune_right_pad_id|>", "<|step_id|>", "<|start_header_id|>", "<|end_header_id|>", "<|eom_id|>",
    "<|eot_id|>", "<|python_tag|>",
] + [f"<|reserved_special_token_{i}|>" for i in range(2, 247)]

TOKENIZERS = {
    "mistral-v1": "Mistral-7B v0.1 / BioMistral-7B (sentencepiece, 32,000; from mistral-common)",
    "llama-3": "Llama 3 / JSL-MedLlama-3-8B (tiktoken BPE, 128,256; from llama-models)",
}
# The model names the importer knows, and the paper's Hugging Face ids, with their tokenizers.
MODEL_TOKENIZERS = {
    "biomistral": "mistral-v1", "BioMistral/BioMistral-7B": "mistral-v1",
    "jsl": "llama-3", "johnsnowlabs/JSL-MedLlama-3-8B-v2.0": "llama-3",
    "meditron": "epfl-llm/meditron-7b",
}


@dataclass
class TextTokenizer:
    """What detection needs of a tokenizer: ids without special tokens, one token's text, the vocabulary."""

    name: str
    vocab_size: int
    encode: Callable[[str], list[int]]
    decode_token: Callable[[int], str]
    encode_batch: Callable[[list[str]], list[list[int]]] | None = None
    # The text of a sequence of ids, where joining each token's text would lose what sits between them (a
    # sentencepiece word's leading space).
    decode_ids: Callable[[list[int]], str] | None = None

    def decode(self, token_ids: list[int]) -> str:
        """The text of `token_ids`, special tokens left out."""
        return self.decode_ids(token_ids) if self.decode_ids else "".join(map(self.decode_token, token_ids))

    def encode_many(self, texts: list[str]) -> list[list[int]]:
        """Ids of many texts, batched where the tokenizer can."""
        return self.encode_batch(texts) if self.encode_batch else [self.encode(text) for text in texts]


def tokenizer_for_model(model: str | None) -> str | None:
    """The tokenizer a known model name implies, or None."""
    return MODEL_TOKENIZERS.get(model or "")


def run_tokenizer(model: str | None, stored: str | None = None) -> str | None:
    """The tokenizer a run's texts are detected with unless one is named: the one stored with the run (a served run's,
    given once when it was generated), else its model's, by name or by the model itself."""
    return stored or tokenizer_for_model(model) or model


def tokenizer_problem(name: str | None, cache_dir: Path = CACHE_DIR) -> str | None:
    """Why a tokenizer cannot be had here, said at once (nothing is downloaded to find out), or None: the shipped
    ones, the embedded model's, a local folder and a Hugging Face id already in the local cache can be had."""
    from fwsapp.models import EMBEDDED_MODEL

    if name is None:
        return "its model is unknown, so name a tokenizer"
    if name in TOKENIZERS or name == EMBEDDED_MODEL or Path(name).is_dir():
        return None
    from transformers import AutoTokenizer

    try:
        AutoTokenizer.from_pretrained(name, local_files_only=True)
    except (OSError, ValueError):
        return (f"the tokenizer '{name}' is not on this machine (shipped here: {', '.join(TOKENIZERS)}): name the folder "
                "of a local copy" + (" (Meditron-7B uses Llama 2's)" if "meditron" in name.lower() else ""))
    return None


def load_tokenizer(name: str, cache_dir: Path = CACHE_DIR) -> TextTokenizer:
    """A registered tokenizer, the embedded model's, or any Hugging Face id or local path: read once per process
    (Llama 3's 128,256 entries take over a second), and again only when a local folder's listing changes. A loaded
    tokenizer is only ever read (encoding sets no padding or truncation), so threads share it, as the app's did."""
    folder = Path(name)
    return _load_tokenizer(name, cache_dir, folder.stat().st_mtime_ns if folder.is_dir() else None)


@lru_cache(maxsize=16)
def _load_tokenizer(name: str, cache_dir: Path, folder_stamp: int | None) -> TextTokenizer:
    if name == "mistral-v1":
        return _mistral_v1()
    if name == "llama-3":
        return _llama_3(cache_dir)
    return _huggingface(name, cache_dir)


def _mistral_v1() -> TextTokenizer:
    import sentencepiece

    path = package_folder("mistral_common") / "data" / "tokenizer.model.v1"
    processor = sentencepiece.SentencePieceProcessor(model_file=str(path))

    def encode(text: str) -> list[int]:
        # sentencepiece's dummy prefix already stands for a space before the text, so one leading space is
        # dropped, as the model's own Hugging Face tokenizer drops it (" diabetes" is "▁diabetes", not "▁", "▁diabetes").
        return processor.encode(text[1:] if text.startswith(" ") else text)

    return TextTokenizer("mistral-v1", processor.get_piece_size(), encode, lambda token: processor.decode([token]),
                         decode_ids=processor.decode)


def _llama_3(cache_dir: Path) -> TextTokenizer:
    return from_huggingface("llama-3", llama_3_huggingface(cache_dir))


def llama_3_huggingface(cache_dir: Path = CACHE_DIR, **special_tokens):
    """Llama 3's tokenizer as a transformers fast tokenizer, from the tiktoken file llama-models ships (converted into
    cache/tokenizers once); `special_tokens` (bos_token=..., say) name its special tokens' roles."""
    from transformers import PreTrainedTokenizerFast

    from fwsapp.models import converted_once

    def convert(folder: Path) -> None:
        from transformers.integrations.tiktoken import TikTokenConverter

        source = package_folder("llama_models") / "llama3" / "tokenizer.model"
        folder.mkdir(parents=True)
        TikTokenConverter(str(source), pattern=LLAMA3_PATTERN,
                          extra_special_tokens=LLAMA3_SPECIAL).converted().save(str(folder / "tokenizer.json"))

    converted = converted_once(cache_dir / "tokenizers" / "llama-3", lambda folder: (folder / "tokenizer.json").exists(),
                               convert)
    return PreTrainedTokenizerFast(tokenizer_file=str(converted / "tokenizer.json"), **special_tokens)


def _huggingface(name: str, cache_dir: Path) -> TextTokenizer:
    from transformers import AutoTokenizer

    from fwsapp.models import embedded_tokenizer_folder, from_cache_first

    source = embedded_tokenizer_folder(cache_dir) if name == EMBEDDED_MODEL else name
    try:
        tokenizer = from_cache_first(AutoTokenizer.from_pretrained, source, Path(str(source)).is_dir())
    except (OSError, ValueError) as error:
        raise ModelLoadError(
            f"No tokenizer '{name}': it is neither {', '.join(TOKENIZERS)} nor a local folder or Hugging Face id "
            f"this machine can reach ({str(error).splitlines()[0][:200]}). Meditron-7B needs its Llama-2 "
            "tokenizer: give the folder of a local copy."
        ) from None
    return from_huggingface(name, tokenizer)


def from_huggingface(name: str, tokenizer) -> TextTokenizer:
    """A Hugging Face tokenizer (a loaded model's, say) as a TextTokenizer."""

    def encode_batch(texts: list[str]) -> list[list[int]]:
        # A fast tokenizer's Rust backend, called directly: transformers' call wraps each text in Python objects
        # (Llama 3 on 75,000 lexicon names: 3.5 s that way, 0.9 s here; one 200-token text: 0.4 ms of a detection's
        # 1.4). The ids are the same while the backend pads and truncates nothing; a padded call (generation's)
        # leaves padding set, and transformers' call resets it.
        backend = tokenizer.backend_tokenizer if tokenizer.is_fast else None
        if backend is None or backend.padding is not None or backend.truncation is not None:
            return tokenizer(texts, add_special_tokens=False)["input_ids"]
        return [encoding.ids for encoding in backend.encode_batch(texts, add_special_tokens=False)]

    return TextTokenizer(name, len(tokenizer), lambda text: encode_batch([text])[0], lambda token: tokenizer.decode([token]),
                         encode_batch,
                         lambda token_ids: tokenizer.decode(token_ids, skip_special_tokens=True))
