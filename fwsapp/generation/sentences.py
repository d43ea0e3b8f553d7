"""Sentence-level rejection sampling, the generation of semantic watermarks (SemStamp, k-SemStamp).

Each answer is written one sentence at a time. A candidate sentence is sampled from the model until it ends, which the
sentence splitter only knows once the next sentence has begun: generation stops there and drops that last token, as
MarkLLM's SentenceEndCriteria does. The watermark then keeps the candidate if its region is valid after the previous
sentence's (the prompt's, for the first) and clear of the borders; otherwise another is drawn. After `max_rejections`
rejections the next candidate is kept whatever its region, so a text always ends.

Candidates are drawn CANDIDATES at a time from the same context, in one batched generate, each judged as it ends, and
the first kept one in draw order wins: the same distribution as drawing them one by one, at a fraction of the passes,
and generation stops as soon as that one is known. Each answer records its
rejections and its own time, the cost users weigh against the robustness.
"""
from __future__ import annotations

import time
from typing import Callable

import torch
from transformers import LogitsProcessorList, StoppingCriteria, StoppingCriteriaList

from fwsapp.generation.batch import GeneratedBatch
from fwsapp.watermark.semantic import SemanticWatermark, sentence_spans

CANDIDATES = 8


class Candidates(StoppingCriteria):
    """CANDIDATES candidate sentences drawn side by side from one context, each judged by the watermark as it ends;
    generation stops once the first kept candidate in draw order is known, which is the one sequential drawing keeps.
    A candidate ends where the next sentence begins (that token dropped) or at the end of sequence."""

    def __init__(self, tokenizer, start: int, stop_ids: set[int], judge: Callable, keep_any_from: int):
        self.tokenizer, self.start, self.stop_ids, self.judge = tokenizer, start, stop_ids, judge
        self.keep_any_from = keep_any_from  # the first row kept whatever its region: the rejections are used up
        self.ended: dict[int, tuple[list[int], bool, int, bool]] = {}  # row -> (tokens, ends the answer, region, kept)

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor, **kwargs) -> torch.BoolTensor:
        self.close([row for row in range(input_ids.shape[0]) if row not in self.ended], input_ids[:, self.start:].tolist(),
                   at_limit=False)
        decided = self.choice() is not None
        return torch.tensor([decided or row in self.ended for row in range(input_ids.shape[0])], device=input_ids.device)

    def close(self, rows: list[int], generated: list[list[int]], at_limit: bool) -> None:
        """Judge the rows among `rows` that have ended (every one, `at_limit`: the token budget is spent)."""
        closing = {}
        for row in rows:
            tokens = generated[row]
            if tokens and tokens[-1] in self.stop_ids:
                closing[row] = (tokens[:-1], True)
            elif at_limit:
                closing[row] = (tokens, False)
            elif len(sentence_spans(self.tokenizer.decode(tokens, skip_special_tokens=True))) > 1:
                closing[row] = (tokens[:-1] or tokens, False)
        verdicts = self.judge([self.tokenizer.decode(tokens, skip_special_tokens=True) or " "
                               for tokens, _ in closing.values()]) if closing else []
        for (row, (tokens, ends)), (region, kept) in zip(closing.items(), verdicts):
            self.ended[row] = (tokens, ends, region, kept)

    def choice(self) -> int | None:
        """The row generation keeps: the first kept one, every row before it ended and rejected; None until known."""
        for row in range(CANDIDATES):
            if row not in self.ended:
                return None
            if self.ended[row][3] or row >= self.keep_any_from:
                return row
        return None


def generate_sentences(lm, watermark: SemanticWatermark, prompts: list[str], max_new_tokens: int, sampling: dict,
                       seed: int, stop_ids: set[int], recorder_factory: Callable,
                       on_step: Callable[[int], None] | None = None):
    """Watermarked answers to `prompts`, each by sentence-level rejection sampling; a GeneratedBatch with each answer's
    rejections and seconds. `recorder_factory()` gives the entropy recorder of one generate."""
    tokenizer = lm.tokenizer
    least = sampling.get("min_new_tokens") or 0
    options = {key: value for key, value in sampling.items() if key != "min_new_tokens"}
    limit = watermark.params["max_rejections"]
    texts, token_ids, entropies, rejections, seconds = [], [], [], [], []
    for offset, prompt in enumerate(prompts):
        started = time.perf_counter()
        torch.manual_seed(seed + offset)
        context = tokenizer(prompt, return_tensors="pt")["input_ids"].to(lm.device)
        region = watermark.region_of(prompt)
        tokens, entropy, rejected, finished = [], [], 0, False
        while len(tokens) < max_new_tokens and not finished:
            tries, chosen = 0, None
            while chosen is None:
                ids = torch.cat([context, torch.tensor([tokens], dtype=torch.long, device=lm.device)], dim=1) \
                    if tokens else context
                batch = ids.repeat(CANDIDATES, 1)
                recorder = recorder_factory()
                # Past the answer's time bound no candidate is rejected: the text ends in bounded time.
                left = 0 if time.perf_counter() - started > watermark.params["max_seconds"] else limit - tries
                candidates = Candidates(tokenizer, ids.shape[1], stop_ids,
                                        lambda texts, region=region: watermark.judged(region, texts), left)
                with torch.inference_mode():
                    output = lm.model.generate(
                        input_ids=batch, attention_mask=torch.ones_like(batch),
                        logits_processor=LogitsProcessorList([recorder]),
                        stopping_criteria=StoppingCriteriaList([candidates]),
                        max_new_tokens=max_new_tokens - len(tokens), min_new_tokens=max(least - len(tokens), 0),
                        pad_token_id=tokenizer.pad_token_id, **options)
                generated = output[:, ids.shape[1]:].tolist()
                if candidates.choice() is None:  # the rows still open were cut by the token budget
                    candidates.close([row for row in range(CANDIDATES) if row not in candidates.ended], generated,
                                     at_limit=True)
                row = candidates.choice()
                if row is None:  # every candidate rejected: draw again
                    tries += CANDIDATES
                    continue
                tries += row
                steps = torch.stack(recorder.steps, dim=1)[row].tolist() if recorder.steps else []
                chosen = candidates.ended[row], steps
            (row_tokens, finished, region, _), steps = chosen
            rejected += tries
            tokens += row_tokens
            entropy += [round(value, 5) for value in steps[:len(row_tokens)]]
            if on_step is not None:
                on_step(len(tokens))
        texts.append(tokenizer.decode(tokens, skip_special_tokens=True))
        token_ids.append(tokens)
        entropies.append(entropy)
        rejections.append(rejected)
        seconds.append(time.perf_counter() - started)
    return GeneratedBatch(texts, token_ids, entropies, sum(seconds), rejections=rejections, text_seconds=seconds)
