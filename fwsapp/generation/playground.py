"""The playground: one typed prompt answered without and with a watermark, through the same unit of work as a run.

A trial is a one-sample run's single unit (generate.compute_unit) computed with no store, so what the playground
shows is exactly what `generate` would store for that prompt, method, parameters and seed. Keeping a trial writes
it as that run, with its prompt and reference saved as a one-row dataset (the run id counts the dataset by content).
"""
from __future__ import annotations

import json
import time
from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import Callable

from fwsapp.data.loaders import save_upload
from fwsapp.data.tasks import Sample
from fwsapp.generation.generate import Unit, UnitResult, UnitWork, compute_unit, generate_runs, run_watermark
from fwsapp.generation.run_config import RunConfig
from fwsapp.generation.batch import GeneratedBatch
from fwsapp.watermark.methods import info
from fwsapp.store import Store
from fwsapp.watermark.base import Detection

KINDS = ("unwatermarked", "watermarked")
# The unwatermarked answers of recent tries, by what they depend on (model, prompt, length, seed, sampling): changing δ,
# or comparing k methods, generates the unwatermarked answer once, not once per try. A few dozen answers at most.
PLAIN_ANSWERS: OrderedDict[str, GeneratedBatch] = OrderedDict()
PLAIN_ANSWERS_KEPT = 32


@dataclass
class Trial:
    config: RunConfig
    prompt: str
    reference: str
    result: UnitResult
    tokens: dict[str, list[str]]  # per text kind, each token decoded
    detections: dict[str, Detection]  # per text kind, with per-token flags
    seconds: float

    def text(self, kind: str) -> str:
        return self.result.rows[0][f"{kind}_text"]

    def verdict(self, kind: str) -> bool:
        """Whether the detector calls this text watermarked at the method's threshold."""
        return info(self.config.method).is_watermarked(self.detections[kind].score, self.config.params)


def check_prompt(prompt: str) -> str:
    """The prompt to answer: not empty, and with any lone surrogate (no character; a tokenizer raises TypeError on
    it) read as U+FFFD."""
    from fwsapp.data.values import without_lone_surrogates

    if not prompt or not prompt.strip():
        raise ValueError("The prompt is empty: type a prompt, or pick a dataset item.")
    return without_lone_surrogates(prompt.strip())[0]


def _config(lm, method: str, params: dict, max_new_tokens: int, seed: int, task: str) -> RunConfig:
    return RunConfig(task=task, method=method, model=lm.name, params=params, n=1, max_new_tokens=max_new_tokens,
                     batch_size=1, seed=seed)


def plain_answer_key(lm, prompt: str, method: str, max_new_tokens: int, seed: int, task: str) -> str:
    """What the unwatermarked answer depends on: model, prompt, length, seed, task and decoding (not the method)."""
    sampling = _config(lm, method, {}, max_new_tokens, seed, task).resolved_sampling()
    return json.dumps([lm.name, prompt, max_new_tokens, seed, task, sampling], sort_keys=True)


def try_prompt(lm, prompt: str, method: str, params: dict, max_new_tokens: int, seed: int, task: str = "qa",
               reference: str = "", on_step: Callable[[str, int], None] | None = None) -> Trial:
    """Answer `prompt` without and with the watermark (`on_step(text kind, token)` follows decoding)."""
    prompt = check_prompt(prompt)
    if info(method).post_hoc:
        raise ValueError(f"{method} is a post-hoc detector, not a watermark: pick a watermark for the playground.")
    config = _config(lm, method, params, max_new_tokens, seed, task)
    started = time.perf_counter()
    key = plain_answer_key(lm, prompt, method, max_new_tokens, seed, task)
    work = UnitWork(config, Unit("playground", 0, (0,)), [Sample(prompt, reference.strip())], PLAIN_ANSWERS.get(key))
    result = compute_unit(lm, run_watermark(lm, config), work, on_step)
    row = result.rows[0]
    PLAIN_ANSWERS[key] = GeneratedBatch([row["unwatermarked_text"]], [list(row["unwatermarked_ids"])],
                                        [list(row["unwatermarked_entropy"])], row["unwatermarked_seconds"] or 0.0)
    PLAIN_ANSWERS.move_to_end(key)
    while len(PLAIN_ANSWERS) > PLAIN_ANSWERS_KEPT:
        PLAIN_ANSWERS.popitem(last=False)
    # The unit's own detections (per-token flags included): the texts are not detected a second time.
    detections = {kind: found for _, kind, found in result.found}
    tokens = {kind: [lm.tokenizer.decode([token]) for token in result.rows[0][f"{kind}_ids"]] for kind in KINDS}
    return Trial(config, prompt, reference.strip(), result, tokens, detections, time.perf_counter() - started)


def answer_figures(trial: Trial) -> dict[str, dict]:
    """Per text kind, what the lm-watermarking demo shows and a cheap quality figure: the method's own score under its
    own label, the threshold it is held to and the verdict, the tokens scored, the green ones and their share, a
    one-sided p-value (`nominal_p_value`), and ROUGE-L to the unwatermarked answer (the watermarked one's) and to the
    reference (when one is given). Counts are of the method's unit (a semantic watermark scores sentences), and
    "strength" names the parameter that sets its strength, where one does."""
    from fwsapp.detection.verdicts import nominal_p_value
    from fwsapp.quality.rouge import rouge

    method = info(trial.config.method)
    plain = trial.text("unwatermarked")
    counts_green = method.evidence is not None and method.evidence.green_list
    figures = {}
    for kind in KINDS:
        found = trial.detections[kind]
        flags = [flag for flag in found.token_flags if flag != -1]
        green = sum(flag == 1 for flag in flags)
        text = trial.text(kind)
        figures[kind] = {
            "score": found.score, "score label": method.score_label, "threshold": method.verdict_rule(trial.config.params),
            "detected": trial.verdict(kind), "scored": found.num_tokens_scored, "unit": method.unit,
            "strength": method.strength_param, "resolution": method.p_resolution(trial.config.params),
            # A green count only where the method draws green lists (a Gumbel or SynthID flag is no green token).
            "green": green if flags and counts_green else None,
            "green share": green / len(flags) if flags and counts_green else None, "p": nominal_p_value(method, found),
            # The unwatermarked answer against itself would read 1.00 beside every try: it has none.
            "ROUGE-L to unwatermarked": rouge([text], [plain])["rougeL"][0] if kind == "watermarked" else None,
            "ROUGE-L to reference": rouge([text], [trial.reference])["rougeL"][0] if trial.reference else None,
            "needed": tokens_needed(method, trial.config.params, found) if kind == "watermarked" else None,
        }
    return figures


def tokens_needed(method, params: dict, found: Detection) -> int | None:
    """About how many scored tokens (sentences, for a semantic watermark) this answer's evidence needs to pass its z
    threshold, when it has not: a z-score of a count grows with the square root of the units scored at a steady share,
    so T·(threshold / z)². None when it passed, when the score is no z, or when the evidence points the other way."""
    if method.score_label != "z" or found.z is None or found.z <= 0 or method.is_watermarked(found.score, params):
        return None
    return int(round(found.num_tokens_scored * (method.threshold(params) / found.z) ** 2))


def history_row(trial: Trial) -> dict:
    """One try for the history table: every method's score in the same columns, named by what it is."""
    figures = answer_figures(trial)
    marked, plain = figures["watermarked"], figures["unwatermarked"]
    return {
        "method": trial.config.method, "settings": info(trial.config.method).settings(trial.config.params),
        "prompt": trial.prompt if len(trial.prompt) <= 60 else trial.prompt[:59] + "…",
        "score is": marked["score label"], "threshold": marked["threshold"],
        "score watermarked": marked["score"], "score unwatermarked": plain["score"],
        "watermark detected": marked["detected"], "false alarm": plain["detected"],
        "green share watermarked": marked["green share"], "p watermarked": marked["p"],
        "ROUGE-L to unwatermarked": marked["ROUGE-L to unwatermarked"], "p resolution": marked["resolution"],
        "new tokens": trial.config.max_new_tokens, "seed": trial.config.seed, "seconds": round(trial.seconds, 1),
        "params": ", ".join(f"{key}={value}" for key, value in trial.config.params.items()),
    }


@dataclass(frozen=True)
class ComparisonStep:
    """Where a comparison is: the method and answer being generated, its token, which generation of how many (k
    methods need k + 1, or k once the unwatermarked answer is known), and about how many seconds are left at the
    pace so far (an upper bound: an answer may end before its last token)."""

    method: str
    kind: str
    token: int
    generation: int
    generations: int
    seconds_left: float | None


class _ComparisonClock:
    """Each decoding step of a comparison as a ComparisonStep, its time left at the pace so far. Every answer runs to
    its last token (min_new_tokens is max_new_tokens unless a decoding setting says otherwise)."""

    def __init__(self, generations: int, max_new_tokens: int, report: Callable[[ComparisonStep], None]):
        self.generations, self.max_new_tokens, self.report = generations, max_new_tokens, report
        self.started, self.current, self.generation = time.perf_counter(), None, 0

    def step(self, method: str, kind: str, token: int) -> None:
        if (method, kind) != self.current:
            self.current, self.generation = (method, kind), self.generation + 1
        done = (self.generation - 1) * self.max_new_tokens + token
        pace = (time.perf_counter() - self.started) / done if done else None
        left = max(self.generations * self.max_new_tokens - done, 0)
        self.report(ComparisonStep(method, kind, token, self.generation, self.generations,
                                   None if pace is None else pace * left))


def compare_methods(lm, prompt: str, methods: list[str], max_new_tokens: int, seed: int, task: str = "qa",
                    reference: str = "", on_step: Callable[[ComparisonStep], None] | None = None) -> list[Trial]:
    """One prompt under several watermarks, each at its defaults, the same model and seed: one trial per method."""
    if not methods:
        raise ValueError("Pick at least one watermark to compare.")
    prompt = check_prompt(prompt)
    plain_known = plain_answer_key(lm, prompt, methods[0], max_new_tokens, seed, task) in PLAIN_ANSWERS
    clock = _ComparisonClock(len(methods) + (not plain_known), max_new_tokens, on_step or (lambda step: None))
    return [try_prompt(lm, prompt, method, dict(info(method).defaults), max_new_tokens, seed, task, reference,
                       on_step=lambda kind, token, method=method: clock.step(method, kind, token))
            for method in methods]


class Replay:
    """An executor that hands back a trial's computed unit, so a kept trial is written as every unit is."""

    def __init__(self, result: UnitResult, reference: str):
        self.result = replace(result, rows=[dict(row, reference=reference) for row in result.rows])

    def run(self, works, prepare, record, progress, cancel=None) -> dict[str, str]:
        for work in works:  # none when the run is stored already
            record(replace(self.result, unit=work.unit))
        return {}


def keep(store: Store, trial: Trial) -> str:
    """Store the trial as its one-sample run (an existing identical run is left as it is); returns the run id."""
    if not trial.reference:
        raise ValueError("A kept trial needs a reference answer: the quality metrics compare each text with it.")
    content = json.dumps([{"prompt": trial.prompt, "reference": trial.reference}]).encode()
    config = replace(trial.config, dataset=str(save_upload(trial.config.task, "playground.json", content)))
    [run_id] = generate_runs(store, [config], Replay(trial.result, trial.reference))
    return run_id
