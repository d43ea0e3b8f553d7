"""vLLM's rules for where its Gumbel watermark acts, torch-free: greedy decoding is sampled plainly, and so is a token
whose context repeats (`deduplicate_contexts`) or, with `all`, reaches into the prompt. The processor
(fwsapp.watermark.vllm_gumbel) applies them while generating; `coverage` replays them on stored tokens.
"""
from __future__ import annotations

from typing import Sequence

from fwsapp.watermark.methods import WATERMARKED, GeneratedAnswer

# vLLM's default: how many most recent positions are searched for a repeated context.
DEDUPLICATION_HISTORY = 8192
GREEDY = "greedy decoding"


class ContextHistory:
    """One text's contexts so far, to tell a repeated one (vLLM's `repeated_context_mask`): the context before each
    position of the history searched (this answer's tokens; with `all`, the prompt's first), its latest position."""

    def __init__(self, width: int, prompt: Sequence[int] = ()):
        self.width, self.tokens, self.latest = width, [-1] * width, {}
        for token in prompt:
            self.append(token)

    def context(self) -> tuple[int, ...]:
        return tuple(self.tokens[-self.width:])

    def repeated(self, context: tuple[int, ...]) -> bool:
        """Whether `context` came before one of the most recent DEDUPLICATION_HISTORY positions."""
        return context in self.latest and self.latest[context] >= len(self.tokens) - self.width - DEDUPLICATION_HISTORY

    def append(self, token: int) -> None:
        self.latest[self.context()] = len(self.tokens) - self.width
        self.tokens.append(int(token))


def is_greedy(sampling: dict) -> bool:
    return not sampling.get("do_sample", True) or float(sampling.get("temperature", 1.0)) == 0


def skip_reason(deduplicate: str, width: int, history: ContextHistory, generated: int, context: tuple[int, ...]
                ) -> str | None:
    """Why vLLM samples the next token plainly, without the watermark, or None where it watermarks it."""
    if deduplicate == "none":
        return None
    if deduplicate == "all" and generated < width:
        return "context reaches into the prompt"
    return "repeated context" if history.repeated(context) else None



def coverage(params: dict, answer: GeneratedAnswer, sampling: dict) -> list[str]:
    """Per generated token, WATERMARKED or why vLLM left it alone: nothing under greedy decoding, and no repeated
    context (nor, with `all`, a context reaching into the prompt). The prompt's tokens are not stored, so with `all` a
    generated context that repeats one of the prompt's own counts as watermarked here."""
    token_ids = answer.token_ids
    if is_greedy(sampling):
        return [GREEDY] * len(token_ids)
    width, deduplicate = params["context_width"], params["deduplicate_contexts"]
    history, reasons = ContextHistory(width), []
    for generated, token in enumerate(token_ids):
        reasons.append(skip_reason(deduplicate, width, history, generated, history.context()) or WATERMARKED)
        history.append(token)
    return reasons
