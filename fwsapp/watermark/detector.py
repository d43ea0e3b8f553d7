"""The detector skeleton of the methods whose evidence is one value per token, read from a keyed draw seeded by the
tokens before it (vLLM's v1/watermarking/detector.py is the model: a base that prepares the contexts, and a method that
writes three hooks).

The base owns what these detectors share:
- the context window: which tokens seed each position's draw (the entry's `context_width`). Either the prompt's last
  tokens seed the first positions, and a position with fewer tokens before it is not scored (MarkLLM's detectors), or,
  as vLLM's, the text is padded with −1 and the prompt is not read (`padded_context`);
- repeated contexts: where the method's own parameter says so (`scores_repeated_contexts`), a context that came before
  is scored once, its first time, as vLLM's `deduplicate_contexts` does;
- gates: the tokens a method's processor left alone are not scored, known from the text (`text_spares`: EntityKGW's
  lexicon names) or from the model's next-token distributions (`model_statistics` and `model_spares`: SWEET's and
  EntityKGW's entropy gates), read in one teacher-forced pass over a batch of texts, and weights (`token_weights`:
  EWD's entropy weights) from the same pass;
- the per-token loop and the Detection: per-token flags (and values, for continuous evidence), from which the length
  curves and WinMax follow through the method's declared `Evidence`.

A method supplies:
- `token_evidence(contexts, tokens)`: each scored token's evidence given its context, its keyed draw read;
- `p_value(statistic, scored)`: how likely the statistic is without the watermark (None where it is no test's);
- and, where the score is a z, `z(statistic, scored)`; `statistic(evidence)` is their sum unless it says otherwise,
  `score` the p-value or the z unless it says otherwise, and `token_values` what a token's evidence shows, where it is
  continuous.
"""
from __future__ import annotations

from abc import abstractmethod
from typing import ClassVar, Sequence

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view
from scipy.stats import gamma as gamma_distribution

from fwsapp.models.teacher_forcing import next_token_log_probs, teacher_force
from fwsapp.watermark.base import Detection, Texts, Watermark
from fwsapp.watermark.evidence import ExponentialSum


class TokenDetector(Watermark):
    # vLLM's windows: the generated tokens after −1 padding, the prompt unread.
    padded_context: ClassVar[bool] = False
    # A token whose evidence exceeds this is flagged as the watermark's (green; above Exp(1)'s median, log 2, for the
    # exponential evidence of the Gumbel family, so half of unwatermarked tokens are).
    flag_above: ClassVar[float] = 0.5
    # Texts teacher-forced together for the model's statistics (a method that needs each alone says 1).
    statistics_batch_size: ClassVar[int] = 16
    # A position with fewer tokens before it than the width is scored on those it has (DiPmark hashes what there is:
    # nothing, for the first token of a text that comes without its prompt); otherwise it is not scored.
    scores_short_contexts: ClassVar[bool] = False
    # Evidence that reads the model's whole next-token distribution before each scored token (Unbiased's likelihood
    # ratios): `token_evidence` gets those log-probability rows as a third argument.
    reads_model_rows: ClassVar[bool] = False

    def __init_subclass__(cls, info=None, **kwargs):
        super().__init_subclass__(info=info, **kwargs)
        if info is not None and info.context_width(info.defaults) is None:
            raise TypeError(f"{info.name}: a detector on the skeleton seeds each token's draw with as many tokens as its "
                            "entry declares: declare seeding_context (tokens_before('prefix_length'), or no_context).")

    def context_width(self) -> int:
        """How many tokens before a position seed its draw: the entry's declaration, which deduplication and evidence
        records read too, so the three cannot disagree."""
        return self.info.context_width(self.params)

    def scores_token(self, token: int) -> bool:
        """Whether a token can be scored at all (EXP leaves a token outside the vocabulary unscored)."""
        return True

    def scores_repeated_contexts(self) -> bool:
        """Whether a context that came before is scored again (vLLM's `deduplicate_contexts` says not)."""
        return True

    def text_spares(self, token_ids: list[int]) -> list[bool] | None:
        """Per token, whether the processor left it alone, read from the text itself; None: it spares none."""
        return None

    def model_statistics(self) -> list:
        """The teacher-forced statistics (`fwsapp.models.teacher_forcing`) its gate or its weights read; none, and
        detection is the text's alone."""
        return []

    def model_spares(self, stats) -> np.ndarray | None:
        """Per token, whether the distribution it was drawn from kept the watermark away (read from `stats`); None:
        the statistics gate nothing."""
        return None

    def token_weights(self, stats, positions: np.ndarray) -> np.ndarray | None:
        """How much each scored token counts (EWD's entropy weights), from the model's statistics; None: each counts
        one."""
        return None

    def windows(self, token_ids: Sequence[int], context_ids: Sequence[int], spared=None
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(contexts, tokens [n], positions [n]): each scored token, the tokens that seed its draw, and where it stands
        among `token_ids`; a token `spared` (per token, where given) is not scored. The contexts are an [n, width]
        array, or, where short contexts are scored, a list of n arrays of at most `width` tokens."""
        width = self.context_width()
        tokens = np.asarray([int(token) for token in token_ids], dtype=np.int64)
        if self.padded_context:
            seeds = np.full(width, -1, dtype=np.int64)
        else:
            seeds = np.asarray([int(token) for token in context_ids][-width:] if width else [], dtype=np.int64)
        full = np.concatenate([seeds, tokens])
        ends = np.arange(len(seeds), len(full))
        if not self.scores_short_contexts:
            ends = ends[ends >= width]
        ends = np.asarray([end for end in ends if self.scores_token(int(full[end]))
                           and not (spared is not None and spared[end - len(seeds)])], dtype=np.int64)
        if self.scores_short_contexts:
            contexts = [full[max(0, end - width):end] for end in ends.tolist()]
        else:
            contexts = (sliding_window_view(full, width)[ends - width] if width and len(ends)
                        else np.zeros((len(ends), width), dtype=np.int64))
        if len(ends) and not self.scores_repeated_contexts():
            kept = ~self.repeated_contexts(contexts, context_ids)
            contexts = contexts[kept] if isinstance(contexts, np.ndarray) else [c for c, keep in zip(contexts, kept) if keep]
            ends = ends[kept]
        return contexts, full[ends], ends - len(seeds)

    def repeated_contexts(self, contexts, context_ids: Sequence[int]) -> np.ndarray:
        """Per scored token, whether its context came before, so that it is not scored again: by default an earlier
        scored token's, as vLLM's `deduplicate_contexts` has it (SynthID's history reads the prompt too)."""
        if isinstance(contexts, np.ndarray):
            first = np.unique(contexts, axis=0, return_index=True)[1]
        else:
            first = list({tuple(context.tolist()): index for index, context in reversed(list(enumerate(contexts)))
                          }.values())
        repeated = np.ones(len(contexts), dtype=bool)
        repeated[first] = False
        return repeated

    @abstractmethod
    def token_evidence(self, contexts, tokens: np.ndarray) -> np.ndarray:
        """Each token's evidence after its context (`windows` says what the contexts are)."""

    def per_token(self, evidence: np.ndarray) -> np.ndarray:
        """The one value per token that is flagged and shown: the evidence itself, unless it holds several per token
        (Unbiased's, one per point of the grid its test maximises over)."""
        return evidence

    def statistic(self, evidence: np.ndarray, weights: np.ndarray | None = None) -> float:
        """The evidence added up, token after token (the order MarkLLM's detectors add in); `weights`: where the method
        weighs its tokens, which only such a method reads."""
        total = 0.0
        for value in evidence.tolist():
            total += value
        return total

    @abstractmethod
    def p_value(self, statistic: float, scored: int) -> float | None:
        """P(statistic at least this large | no watermark) over `scored` tokens."""

    def z(self, statistic: float, scored: int) -> float:
        raise NotImplementedError(f"{self.name} scores a p-value, not a z.")

    def score(self, statistic: float, scored: int, z: float | None, p: float | None) -> float:
        """What thresholds and curves read: the p-value or the z, as the entry's score label says (SynthID's is its
        statistic, the mean g-value)."""
        return p if self.info.score_label == "p" else z

    def token_values(self, evidence: np.ndarray) -> np.ndarray | None:
        """Continuous evidence per scored token in [0, 1], 0.5 where an unwatermarked token averages; None: the method
        shows flags alone."""
        return None

    def detect(self, token_ids: Sequence[int], context_ids: Sequence[int] = ()) -> Detection:
        return self.detect_many([(token_ids, context_ids)])[0]

    def detect_many(self, texts: Texts) -> list[Detection]:
        """Each text detected on its own; a model gate's statistics read for all of them in one teacher-forced pass."""
        texts = [([int(token) for token in token_ids], context_ids) for token_ids, context_ids in texts]
        wanted = self.model_statistics()
        stats = (teacher_force(self.lm, [(context_ids, tokens) for tokens, context_ids in texts], wanted,
                               batch_size=self.statistics_batch_size)
                 if wanted else [None] * len(texts))
        return [self.detect_text(tokens, context_ids, found) for (tokens, context_ids), found in zip(texts, stats)]

    def detect_text(self, token_ids: list[int], context_ids: Sequence[int], stats=None) -> Detection:
        """One text's detection, its gates applied (`stats`: the model's statistics where its gate reads them)."""
        spared = self.text_spares(token_ids)
        gated = self.model_spares(stats) if stats is not None else None
        if gated is not None:
            spared = gated if spared is None else [skip or bool(model_skip) for skip, model_skip in zip(spared, gated)]
        contexts, tokens, positions = self.windows(token_ids, context_ids, spared)
        if not len(tokens):
            evidence = np.zeros(0)
        elif self.reads_model_rows:
            rows = next_token_log_probs(self.lm, context_ids, token_ids)[positions]
            evidence = np.asarray(self.token_evidence(contexts, tokens, rows), dtype=float)
        else:
            evidence = np.asarray(self.token_evidence(contexts, tokens), dtype=float)
        weights = self.token_weights(stats, positions) if stats is not None else None
        statistic, scored = self.statistic(evidence, weights), len(tokens)
        p = self.p_value(statistic, scored)
        flags = np.full(len(token_ids), -1)
        evidence = self.per_token(evidence)
        flags[positions] = evidence > self.flag_above
        values, shown = [], self.token_values(evidence)
        if shown is not None:
            values = np.full(len(token_ids), 0.5)
            values[positions] = shown
            values = values.tolist()
        token_weights = []
        if weights is not None:
            token_weights = np.zeros(len(token_ids))
            token_weights[positions] = weights
            token_weights = token_weights.tolist()
        z = None if self.info.score_label == "p" else self.z(statistic, scored)
        return Detection(score=self.score(statistic, scored, z, p), z=z, p=p, statistic=statistic if z is None else None,
                         num_tokens_scored=scored, token_flags=flags.tolist(), token_values=values,
                         token_weights=token_weights)


class ExponentialDetector(TokenDetector):
    """The Gumbel family's detector (EXP, PF, vLLM's): a token's evidence is Exp(1) without the key, flagged above its
    median (log 2), shown as e / (e + 1), and the p-value of n tokens is the Gamma(n, 1) tail of their sum."""

    evidence = ExponentialSum()
    flag_above = float(np.log(2))

    def token_values(self, evidence: np.ndarray) -> np.ndarray:
        """e / (e + 1): 0.5 at Exp(1)'s mean, as MarkLLM's view shows it."""
        return evidence / (evidence + 1)

    def p_value(self, statistic: float, scored: int) -> float:
        return float(gamma_distribution.sf(statistic, scored)) if scored else 1.0
