"""A keyed draw (PRF) shared by methods: r ~ U(0, 1)^V for the token after a context, from a CPU generator seeded as
MarkLLM 0.1.5 seeds its EXP, SWEET and EWD generators, hash key × (the product of the last tokens mod V). EXP reads
r^(1/p), PF p / r; the green lists of SWEET's seeding (`kgw.GreenLists`) take the same seed. `UniformsDetector` is what
the methods that choose their token from these uniforms share."""
from __future__ import annotations

from typing import Callable, ClassVar, Sequence

import torch
from transformers import LogitsProcessor

from fwsapp.watermark.detector import ExponentialDetector


def prefix_product(prefix: Sequence[int], prefix_length: int) -> int:
    """The product of the last `prefix_length` tokens: MarkLLM's "time" hash of a context."""
    product = 1
    for token in prefix[-prefix_length:]:
        product *= int(token)
    return product


def multiplied_seed(prefix: Sequence[int], prefix_length: int, hash_key: int, vocab_size: int) -> int:
    """hash key × (prefix product mod V): how MarkLLM's SWEET, EWD and EXP seed their generators."""
    return hash_key * (prefix_product(prefix, prefix_length) % vocab_size)


class KeyedUniforms:
    """r ~ U(0, 1)^V for the token after a prefix, from a CPU generator seeded as MarkLLM seeds it."""

    def __init__(self, vocab_size: int, hash_key: int, prefix_length: int):
        self.vocab_size = vocab_size
        self.hash_key = hash_key
        self.prefix_length = prefix_length
        self.generator = torch.Generator(device="cpu")

    def draw(self, prefix: Sequence[int]) -> torch.Tensor:
        self.generator.manual_seed(multiplied_seed(prefix, self.prefix_length, self.hash_key, self.vocab_size))
        return torch.rand(self.vocab_size, generator=self.generator)

    def drawn(self, contexts, tokens) -> list[float]:
        """r of each token after its context (the rows of `contexts`), as detection reads it."""
        return [float(self.draw(context.tolist())[token]) for context, token in zip(contexts, tokens.tolist())]


class KeyedChoiceProcessor(LogitsProcessor):
    """The token a keyed rule chooses from the next-token probabilities p and the uniforms r its context draws: the
    largest of `keys(p, r)` (EXP's r^(1/p), PF's p / r) among the tokens with p > 0, or among the top_k likeliest when
    top_k > 0. Every other logit becomes −inf, so the sampler after it returns that token."""

    def __init__(self, uniforms: KeyedUniforms, top_k: int, keys: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]):
        self.uniforms = uniforms
        self.top_k = top_k
        self.keys = keys

    def choose(self, probs: torch.Tensor, uniforms: torch.Tensor) -> torch.Tensor:
        keys = torch.where(probs > 0, self.keys(probs, uniforms), torch.tensor(float("-inf")))
        if self.top_k > 0:
            kept = torch.topk(probs, min(self.top_k, probs.shape[-1]), dim=-1).indices
            keys = torch.full_like(keys, float("-inf")).scatter(1, kept, keys.gather(1, kept))
        return keys.argmax(dim=-1)

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        if input_ids.shape[-1] < self.uniforms.prefix_length:
            return scores
        width = min(scores.shape[-1], self.uniforms.vocab_size)
        probs = torch.softmax(scores[:, :width].float(), dim=-1).cpu()
        draws = torch.stack([self.uniforms.draw(row)[:width] for row in input_ids.tolist()])
        chosen = self.choose(probs, draws).to(scores.device)
        return torch.full_like(scores, float("-inf")).scatter(1, chosen.unsqueeze(1), 0.0)


class UniformsDetector(ExponentialDetector):
    """A method that takes the token of largest `keys(p, r)` over these uniforms (its choice rule) and scores each
    token's Exp(1) evidence from its r (`token_evidence`); a token outside the vocabulary is not scored."""

    keys: ClassVar[Callable[[torch.Tensor, torch.Tensor], torch.Tensor]]

    def __init__(self, vocab_size: int, lm=None, **params):
        super().__init__(vocab_size, lm, **params)
        self.uniforms = KeyedUniforms(vocab_size, self.params["hash_key"], self.params["prefix_length"])

    def logits_processor(self) -> LogitsProcessor:
        return KeyedChoiceProcessor(self.uniforms, self.params["top_k"], type(self).keys)

    def scores_token(self, token: int) -> bool:
        return 0 <= token < self.vocab_size
