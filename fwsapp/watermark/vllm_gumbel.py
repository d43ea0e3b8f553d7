"""The Gumbel watermarks vLLM serves natively (`vllm serve --watermark-config`), generated and detected as vLLM 0.33.0
does (`vllm/v1/watermarking`).

Generation. The last `context_width` generated tokens (−1 before the first) key a Philox uniform u_v for every
token v (`fwsapp.watermark.philox`); the token taken is argmax_v (logit_v − log(−log u_v)): Gumbel-max sampling with
keyed noise, after temperature, top-k and top-p, in vLLM's order. Greedy decoding is not watermarked. A context
already met in the text (`deduplicate_contexts`: `single_turn`, this answer's tokens; `all`, the prompt's too, and the
first `context_width` tokens are left unwatermarked) would reuse its noise, so that token is sampled without the
watermark. The dual-key variant routes each token to key B with probability `alpha`, else to key A, both derived
from the key by SHA-256.

Detection. Each token scored gives e = −log(1 − u) for its context, Exp(1) without the watermark; a repeated context
counts once. The score is Σe, whose null is Gamma(N, 1) (dual key: Σ((1 − α)e_A + αe_B), Gamma(N/v, v) with
v = (1 − α)² + α²), and the p-value its tail.

Speed. Only tokens that could win are keyed: the noise lies in [−log(−log u_min), −log(−log u_max)], so after the
64 likeliest tokens set a best score, a token whose logit plus the largest noise falls short of it cannot win.
That leaves the answer exactly vLLM's, at a small share of the vocabulary's Philox calls.
"""
from __future__ import annotations

import math

import numpy as np
import torch
from scipy.special import gammaincc
from transformers import (LogitsProcessor, LogitsProcessorList, TemperatureLogitsWarper, TopKLogitsWarper,
                          TopPLogitsWarper)

from fwsapp.watermark import methods
from fwsapp.watermark.base import GenerationBatch
from fwsapp.watermark.detector import ExponentialDetector
from fwsapp.watermark.evidence import ExponentialSum
from fwsapp.watermark.philox import LARGEST_UNIFORM, PhiloxPRF, derive_key
from fwsapp.watermark.vllm_contexts import ContextHistory, is_greedy, skip_reason

FIRST_CANDIDATES = 64
_NOISE_MAX = -torch.log(-torch.log(torch.tensor(LARGEST_UNIFORM)))  # float32, as vLLM computes every noise


def processed_logits(scores: torch.Tensor, sampling: dict) -> torch.Tensor:
    """The logits vLLM's sampler hands its watermarker: in float32, divided by the temperature, then top-k, then
    top-p masked to −inf. transformers' warpers apply the same masks in the same order (vLLM's
    `apply_top_k_top_p_pytorch`: top-k keeps the logits at or above the k-th largest; top-p drops the smallest whose
    cumulative probability is at most 1 − p, keeping at least one)."""
    warpers = LogitsProcessorList([TemperatureLogitsWarper(float(sampling.get("temperature") or 1.0))])
    if 0 < int(sampling.get("top_k") or 0) < scores.shape[-1]:
        warpers.append(TopKLogitsWarper(int(sampling["top_k"])))
    if float(sampling.get("top_p") or 1.0) < 1.0:
        warpers.append(TopPLogitsWarper(float(sampling["top_p"])))
    return warpers(None, scores.float())


def _noised(logits: torch.Tensor, rows: torch.Tensor, tokens: torch.Tensor, uniforms: np.ndarray) -> torch.Tensor:
    """logit − log(−log u) of each (row, token) pair, in float32 as vLLM adds them."""
    noise = -torch.log(-torch.log(torch.from_numpy(uniforms).clamp_min(torch.finfo(torch.float32).tiny)))
    return logits[rows, tokens] + noise


def gumbel_choice(logits: torch.Tensor, contexts: np.ndarray, prf: PhiloxPRF) -> torch.Tensor:
    """argmax_v (logit_v + noise_v) per row, the first such token on a tie (torch.argmax's rule), for (B, V) float32
    CPU logits and (B, width) contexts: vLLM's `GumbelWatermarker` choice, keyed only where a token could win. The
    second stage keys whole groups of four tokens, which one Philox call serves."""
    batch, vocabulary = logits.shape
    states = prf.context_states(contexts)
    top = logits.topk(min(FIRST_CANDIDATES, vocabulary), dim=-1).indices.reshape(-1)
    rows = torch.arange(batch).repeat_interleave(min(FIRST_CANDIDATES, vocabulary))
    first = prf.uniform_at(tuple(word[rows.numpy()] for word in states), top.numpy())
    best = _noised(logits, rows, top, first).reshape(batch, -1).max(dim=-1).values
    reach = (logits + _NOISE_MAX) >= best[:, None]
    padded = torch.nn.functional.pad(reach, (0, -vocabulary % 4))  # a vocabulary not a multiple of 4: no token there
    rows, groups = padded.reshape(batch, -1, 4).any(dim=-1).nonzero(as_tuple=True)
    uniforms = prf.group_uniforms(tuple(word[rows.numpy()] for word in states), groups.numpy())
    tokens = (groups[:, None] * 4 + torch.arange(4)).reshape(-1)
    rows, inside = rows.repeat_interleave(4), tokens < vocabulary
    rows, tokens, uniforms = rows[inside], tokens[inside], uniforms.reshape(-1)[inside.numpy()]
    values = _noised(logits, rows, tokens, uniforms)
    row_best = torch.full((batch,), float("-inf")).scatter_reduce(0, rows, values, "amax")
    winners = values == row_best[rows]
    return torch.full((batch,), vocabulary, dtype=torch.long).scatter_reduce(0, rows[winners], tokens[winners], "amin")


class GumbelLogitsProcessor(LogitsProcessor):
    """vLLM's watermarked sampling step inside transformers' `generate`: a watermarked row keeps only the chosen
    token (every other logit −inf, so the sampler after it returns that token); a row whose context repeats, or
    greedy decoding, is left to ordinary sampling (its logits untouched: transformers' warpers apply temperature,
    top-k and top-p once)."""

    def __init__(self, keys: tuple[PhiloxPRF, ...], alpha: float, width: int, deduplicate: str, batch: GenerationBatch):
        self.keys, self.alpha, self.width, self.deduplicate = keys, alpha, width, deduplicate
        self.sampling = batch.sampling
        self.prompts = batch.prompt_ids
        self.routing = torch.Generator().manual_seed(batch.seed)  # which key each token of the dual key uses
        self.histories: list[ContextHistory] | None = None

    def _follow(self, input_ids: torch.LongTensor) -> None:
        """Take in the token each row sampled last step (the prompt on the first call)."""
        if self.histories is None:
            prompts = self.prompts if self.deduplicate == "all" else [()] * input_ids.shape[0]
            self.histories = [ContextHistory(self.width, prompt) for prompt in prompts]
            self.generated = [[] for _ in self.histories]
            return
        for history, generated, token in zip(self.histories, self.generated, input_ids[:, -1].tolist()):
            generated.append(token)
            history.append(token)

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        self._follow(input_ids)
        if is_greedy(self.sampling):
            return scores  # greedy decoding cannot be watermarked: vLLM samples it plainly too
        contexts = np.array([([-1] * self.width + generated)[-self.width:] for generated in self.generated],
                            dtype=np.int64).reshape(len(self.generated), self.width)
        skipped = torch.tensor([skip_reason(self.deduplicate, self.width, history, len(generated), tuple(context))
                                is not None for history, generated, context
                                in zip(self.histories, self.generated, contexts.tolist())])
        logits = processed_logits(scores, self.sampling).cpu()
        chosen = self._choice(logits, contexts)
        marked = torch.full_like(scores, float("-inf")).scatter(1, chosen.to(scores.device)[:, None], 0.0)
        return torch.where(skipped.to(scores.device)[:, None], scores, marked)

    def _choice(self, logits: torch.Tensor, contexts: np.ndarray) -> torch.Tensor:
        if len(self.keys) == 1 or self.alpha == 0:
            return gumbel_choice(logits, contexts, self.keys[0])
        if self.alpha == 1:
            return gumbel_choice(logits, contexts, self.keys[1])
        # vLLM draws both keys' tokens and keeps one per row; drawing only the kept one gives the same tokens.
        key_b = torch.rand(logits.shape[0], generator=self.routing) < self.alpha
        chosen = torch.empty(logits.shape[0], dtype=torch.long)
        for routed, key in ((~key_b, self.keys[0]), (key_b, self.keys[1])):
            if routed.any():
                chosen[routed] = gumbel_choice(logits[routed], contexts[routed.numpy()], key)
        return chosen


class WeightedExponentialSum(ExponentialSum):
    """The dual key's evidence (1 − α)e_A + αe_B: its sum over N tokens is close to Gamma(N/v, v), v = (1 − α)² + α²."""

    def scores(self, arrays, params, window=None):
        from fwsapp.watermark.evidence import sums

        variance = (1 - params["alpha"]) ** 2 + params["alpha"] ** 2
        total, scored = sums(arrays["evidence"], window), sums(arrays["scored"], window)
        return np.where(scored > 0, gammaincc(np.maximum(scored, 1) / variance, total / variance), 1.0)

    def null(self, arrays, params, rng, draws):
        alpha, shape = params["alpha"], (draws, arrays["scored"].size)
        evidence = (1 - alpha) * rng.exponential(1.0, shape) + alpha * rng.exponential(1.0, shape)
        return {**arrays, "evidence": evidence * arrays["scored"]}


def gamma_survival(total: float, shape: int) -> float:
    """P(Gamma(shape, 1) > total) for a whole shape: e^(−total) Σ_(k<shape) total^k / k!, its terms summed in log space
    from the largest. Written out, not scipy's gammaincc (which agrees to about 1e-13), because vLLM's detector sums
    this series so, and a client that compares this service's p-values with vLLM's server gets the same digits."""
    if shape <= 0 or total <= 0:
        return 1.0
    log_total, log_term, log_terms = math.log(total), 0.0, [0.0]
    for k in range(1, shape):
        log_term += log_total - math.log(k)
        log_terms.append(log_term)
    largest = max(log_terms)
    log_sum = largest + math.log(sum(math.exp(term - largest) for term in log_terms))
    return min(1.0, math.exp(min(0.0, log_sum - total)))


class VLLMGumbel(ExponentialDetector, info=methods.VLLM_GUMBEL):
    """The generated tokens alone are scored, from −1 padding as vLLM's detector does; the prompt is not read."""

    padded_context = True
    key_domains: tuple[bytes, ...] = ()  # the single key is used as given

    def __init__(self, vocab_size: int, lm=None, **params):
        super().__init__(vocab_size, lm, **params)
        key = self.params["key"]
        self.keys = tuple(PhiloxPRF(derive_key(key, domain)) for domain in self.key_domains) or (PhiloxPRF(key),)

    @property
    def alpha(self) -> float:
        return self.params.get("alpha", 0.0)

    def generation_kwargs(self, batch: GenerationBatch) -> dict:
        return {"logits_processor": [GumbelLogitsProcessor(self.keys, self.alpha, self.params["context_width"],
                                                           self.params["deduplicate_contexts"], batch)]}

    def logits_processor(self) -> LogitsProcessor:
        return self.generation_kwargs(GenerationBatch(1, 0))["logits_processor"][0]

    def key_evidence(self, key: PhiloxPRF, contexts: np.ndarray, tokens: np.ndarray) -> torch.Tensor:
        """e = −log(1 − u) of each token after its context under one key, in float64 and with torch's log1p, as vLLM's
        detector computes it (numpy's log1p differs in the last bit now and then)."""
        return -torch.log1p(-torch.from_numpy(key.uniform(contexts, tokens[:, None])[:, 0]).to(torch.float64))

    def token_evidence(self, contexts: np.ndarray, tokens: np.ndarray) -> np.ndarray:
        return self.key_evidence(self.keys[0], contexts, tokens).numpy()

    def p_value(self, total: float, scored: int) -> float:
        return gamma_survival(total, scored)

    def scores_repeated_contexts(self) -> bool:
        return self.params["deduplicate_contexts"] == "none"  # else a repeated context reuses its noise: scored once

    def statistic(self, evidence: np.ndarray, weights: np.ndarray | None = None) -> float:
        return torch.from_numpy(evidence).sum().item()  # torch's order of summation, as vLLM's detector adds


class VLLMGumbelDualKey(VLLMGumbel, info=methods.VLLM_GUMBEL_DUALKEY):
    evidence = WeightedExponentialSum()
    key_domains = (b"key_a", b"key_b")

    def token_evidence(self, contexts: np.ndarray, tokens: np.ndarray) -> np.ndarray:
        each = torch.stack([self.key_evidence(key, contexts, tokens) for key in self.keys], dim=-1)
        return (each @ each.new_tensor([1 - self.alpha, self.alpha])).numpy()

    def p_value(self, total: float, scored: int) -> float:
        """vLLM's: the Gamma(N/v) tail at Σ/v, with N/v rounded where it is whole (α of 0, ½ or 1), else torch's
        incomplete gamma function, whose last digits differ from scipy's (about 1e-10 relative)."""
        if not scored:
            return 1.0
        variance = (1 - self.alpha) ** 2 + self.alpha ** 2
        if self.alpha in (0, 0.5, 1):
            return gamma_survival(total / variance, round(scored / variance))
        return torch.special.gammaincc(torch.tensor(scored / variance, dtype=torch.float64),
                                       torch.tensor(total / variance, dtype=torch.float64)).item()
