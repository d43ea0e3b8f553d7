"""The pipeline's steps: generate, detect, score, judge and analyze. The CLI and the app's background jobs
call these and nothing else, so a run made from either is the same run.

Each step takes the store, the runs it works on (generation takes the configs that name them), a
`model_loader(name) -> LoadedModel` (the CLI's keeps each model once per process, the app's is
`st.cache_resource`), a `progress(done, total, note="")` callback, whose counts are samples (texts for
re-detection, pairs for the judge) and whose note says what is under way, and a `cancel` event; then its
own options.
Every step resumes: what is stored is skipped, and each batch is written as it finishes.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field, replace
from typing import Callable

from fwsapp.detection import length
from fwsapp.watermark import methods
from fwsapp.entities.introduced import HALLUCINATION_THRESHOLD
from fwsapp.generation.run_config import RunConfig
from fwsapp.judge.registry import REQUEST_TIMEOUT_SECONDS
from fwsapp.plugins import checked_seed
from fwsapp.store import Store

Progress = Callable[..., None]
ModelLoader = Callable[[str], object]


def _quiet(done: int, total: int, note: str = "") -> None:
    """The progress callback when the caller wants none."""


def _cancelled(cancel: threading.Event | None) -> bool:
    return cancel is not None and cancel.is_set()


def _per_run(progress: Progress | None, sizes: list[int]) -> list[Progress | None]:
    """One progress callback per run on a single total, the sum of `sizes`: a run's own (done, total) is scaled
    to its size, so the bar's total is known before work starts and never changes mid-job."""
    if progress is None:
        return [None] * len(sizes)
    total = sum(sizes)

    def step(before: int, size: int) -> Progress:
        return lambda done, own_total, note="": progress(before + (size * done // own_total if own_total else 0),
                                                         total, note)

    return [step(sum(sizes[:index]), size) for index, size in enumerate(sizes)]


def generate(store: Store, configs: list[RunConfig], model_loader: ModelLoader, progress: Progress | None = None,
             cancel: threading.Event | None = None, executor=None) -> list[str]:
    """Generate (or finish) one run per config; returns their ids. Progress counts samples. Units run in this
    process by default, or on `executor` (a `RayExecutor` for a cluster); either way this process writes."""
    from fwsapp.generation.generate import InProcess, generate_runs

    return generate_runs(store, configs, executor or InProcess(model_loader), progress, cancel)


def sweep_configs(base: RunConfig, grid: dict[str, list] | None = None) -> list[RunConfig]:
    """One config per point of the grid (the method's declared grid by default): the paper's Figure 5."""
    import itertools

    grid = grid or methods.info(base.method).sweep_grid
    keys = list(grid)
    return [replace(base, params={**base.params, **dict(zip(keys, values))})
            for values in itertools.product(*(grid[key] for key in keys))]


@dataclass
class Redetection:
    run_id: str
    set_id: str
    method: str
    tokenizer: str
    attack_set: str | None = None  # the attack set whose texts it scored


def detect(store: Store, run_ids: list[str], model_loader: ModelLoader, progress: Progress | None = None,
           cancel: threading.Event | None = None, *, method: str | None = None, params: dict | None = None,
           tokenizer: str | None = None, normalize: str | None = None, by_length: bool = False,
           window: int | None = None, deduplicate: bool = False) -> list[Redetection]:
    """Score each run's stored texts again under `method` (default: the run's own) with `params` over the
    run's own, and `tokenizer` (default: the one its model implies), each text normalised first where `normalize`
    names a normaliser: a detection set per run (`attack` scores attacked texts through the same steps). `by_length`
    gives every text its score at every length (fwsapp.detection.length); `window` scores each text's best window of
    that many tokens (WinMax); `deduplicate` scores each repeated (context, token) pair once
    (fwsapp.detection.deduplication)."""
    from fwsapp.detection.deduplication import deduplication_problem
    from fwsapp.detection.verdicts import verdict_method

    for run_id in run_ids:  # before any model or tokenizer is loaded: checked against each run's method
        run_method = verdict_method(method or store.run(run_id)["method"]).name
        if window is not None:
            length.check_window(run_method, window)
        if deduplicate and (problem := deduplication_problem(run_method)):
            raise ValueError(problem)
    plans, tokenizers = _detection_plans(store, run_ids, method, params, tokenizer, normalize)
    return _detect_planned(store, plans, tokenizers, model_loader, progress, cancel, normalize, {}, by_length, window,
                           deduplicate)


def lengths(store: Store, run_ids: list[str], model_loader: ModelLoader, progress: Progress | None = None,
            cancel: threading.Event | None = None, *, tokenizer: str | None = None) -> list[Redetection]:
    """Give each run a score at every length for every text: a run generated here has them from its own detection
    already; the others (imported runs, runs stored before curves were kept, methods without per-token evidence) are
    detected again from their text with their own method and parameters, the curves kept in that detection set."""
    missing = [run_id for run_id in run_ids if length.run_curves(store, run_id) is None]
    return detect(store, missing, model_loader, progress, cancel, tokenizer=tokenizer, by_length=True) if missing else []


def predict_lengths(store: Store, run_ids: list[str], model_loader: ModelLoader, progress: Progress | None = None,
                    cancel: threading.Event | None = None) -> int:
    """Tokens to detect predicted from entropy (fwsapp.detection.predicted_length): each run's watermarked answers
    read under its own model; every run is checked before a model loads. Returns the answers predicted now."""
    from fwsapp.detection.predicted_length import predict_run, run_prediction_problem

    runs = [store.run(run_id) for run_id in run_ids]
    for run in runs:
        if problem := run_prediction_problem(run):
            raise ValueError(f"Run {run['run_id']}: {problem}")
    done = 0
    for run, step in zip(runs, _per_run(progress, [store.count("generations", run["run_id"]) for run in runs])):
        if _cancelled(cancel):
            break
        done += predict_run(store, run["run_id"], model_loader(run["model"]), step, cancel)
    return done


def audit_keys(store: Store, run_id: str, model_loader: ModelLoader, keys: int, seed: int = 0, *,
               method: str | None = None, params: dict | None = None, tokenizer: str | None = None,
               corpus: list[str] | None = None):
    """False positives under the deployer's key: human text (the run's references, or `corpus`: the hospital's own
    notes) detected under the run's method and key and keys − 1 drawn ones, with and without deduplication
    (fwsapp.detection.key_audit). Everything is checked before the tokenizer or a model loads."""
    from fwsapp.detection.key_audit import audit, audit_keys_drawn, audit_problem
    from fwsapp.models.tokenizers import load_tokenizer, run_tokenizer
    from fwsapp.watermark.methods import info

    checked_seed(seed)
    run = store.run(run_id)
    method, params = detection_settings(run, method, params)
    if problem := audit_problem(method):
        raise ValueError(problem)
    audit_keys_drawn(info(method), 0, keys, seed)  # the count
    texts = corpus if corpus is not None else [
        text for text in store.generations(run_id).reference if isinstance(text, str) and text.strip()]
    if not texts:
        raise ValueError(f"Run {run_id} has no references to audit with: give a file of human texts instead.")
    loaded = load_tokenizer(tokenizer or run_tokenizer(run["model"], run.get("tokenizer")))
    lm = model_loader(detector_model(run, tokenizer)) if info(method).detector_needs_model(params) else None
    ids = [(token_ids, []) for token_ids in loaded.encode_many(texts) if len(token_ids) >= length.MIN_TOKENS]
    return audit(method, params, ids, loaded.vocab_size, keys, seed, lm=lm, tokenizer=loaded)


def undetectable(store: Store, run_ids: list[str], tokenizer: str | None = None) -> dict[str, str]:
    """The runs whose texts cannot be detected again here, each with why: no texts (scores imported alone), or a
    tokenizer this machine lacks. A command over every run skips and names them; the others go on."""
    from fwsapp.models.tokenizers import run_tokenizer, tokenizer_problem

    reasons, problems = {}, {}
    for run_id in run_ids:
        run = store.run(run_id)
        name = tokenizer or run_tokenizer(run["model"], run["tokenizer"])
        if not store.count("generations", run_id):
            reasons[run_id] = "it holds no texts (its scores were imported alone)"
        elif name not in problems and (problem := tokenizer_problem(name)) is not None:
            problems[name] = problem
        if run_id not in reasons and problems.get(name):
            reasons[run_id] = problems[name]
    return reasons


def detection_settings(run: dict, method: str | None = None, params: dict | None = None) -> tuple[str, dict]:
    """The method a run's texts are detected with (`method`, else the run's own) and its parameters, checked: the
    run's own under its own method (its key among them), with `params` over them."""
    chosen = methods.canonical_name(method or run["method"])
    own = run["params"] if chosen == run["method"] else {}
    return chosen, methods.info(chosen).checked_params({**own, **(params or {})})


def detection_reads_model(store: Store, run_ids: list[str], method: str | None = None,
                          params: dict | None = None) -> bool:
    """Whether detecting these runs (under `method` and `params`, else their own) loads a model."""
    return any(methods.info(chosen).detector_needs_model(merged)
               for chosen, merged in (detection_settings(store.run(run_id), method, params) for run_id in run_ids))


def detector_model(run: dict, tokenizer: str | None = None) -> str:
    """The model a detector that reads one (SWEET's entropy gate, a model-scored statistic) loads for a run's texts:
    the run's own model where it was generated here and no other tokenizer is named (a 7B model's run is tokenised
    by a shipped tokenizer, "mistral-v1", which is no model); else the model the tokenizer names (`tokenizer`, or
    the run's: a Hugging Face id or folder), whose vocabulary the ids are in."""
    from fwsapp.models.tokenizers import run_tokenizer
    from fwsapp.store import generated_here

    own = run_tokenizer(run["model"], run["tokenizer"])
    if generated_here(run) and tokenizer in (None, own):  # the Detect page's form names the run's own
        return run["model"]
    return tokenizer or own


def _detection_plans(store: Store, run_ids: list[str], method: str | None, params: dict | None,
                     tokenizer: str | None, normalize: str | None) -> tuple[list[tuple], dict]:
    """Each run's (run id, method, merged parameters, tokenizer name, `detector_model`), every one checked and its
    tokenizer loaded before any work: a bad parameter or a tokenizer this machine cannot load is one line, with nothing
    stored."""
    from fwsapp.detection.normalizers import normalizer
    from fwsapp.models.tokenizers import load_tokenizer, run_tokenizer

    normalizer(normalize)
    plans, tokenizers = [], {}
    for run_id in run_ids:
        run = store.run(run_id)
        if not store.count("generations", run_id):
            raise ValueError(f"{run_id} holds no texts (its scores were imported alone): there is nothing to detect "
                             "again; import its generations with them to detect its texts.")
        chosen, merged = detection_settings(run, method, params)
        name = tokenizer or run_tokenizer(run["model"], run["tokenizer"])
        if not name:
            raise ValueError(f"{run_id}: its model is unknown, so name a tokenizer.")
        if name not in tokenizers:
            tokenizers[name] = load_tokenizer(name)
        plans.append((run_id, chosen, merged, name, detector_model(run, tokenizer)))
    return plans, tokenizers


def _detect_planned(store: Store, plans: list[tuple], tokenizers: dict, model_loader: ModelLoader,
                    progress: Progress | None, cancel: threading.Event | None, normalize: str | None,
                    attack_sets: dict[str, str], by_length: bool = False,
                    window: int | None = None, deduplicate: bool = False) -> list[Redetection]:
    from fwsapp.detection.redetect import redetect

    # Each run's own texts, then its attacked texts where there are some.
    sets = [(plan, attack_set) for plan in plans
            for attack_set in ((None, attack_sets[plan[0]]) if plan[0] in attack_sets else (None,))]
    sizes = [store.count("generations", plan[0]) * (1 if attack_set else 2) for plan, attack_set in sets]
    results = []
    for ((run_id, chosen, merged, name, model), attack_set), step in zip(sets, _per_run(progress, sizes)):
        if _cancelled(cancel):
            break
        lm = model_loader(model) if methods.info(chosen).detector_needs_model(merged) else None
        set_id = redetect(store, run_id, chosen, merged, tokenizers[name], lm=lm, progress=step, cancel=cancel,
                          attack_set=attack_set, normalize=normalize, by_length=by_length and not attack_set,
                          window=window, deduplicate=deduplicate)
        results.append(Redetection(run_id, set_id, chosen, tokenizers[name].name, attack_set))
    return results


def attack(store: Store, run_ids: list[str], model_loader: ModelLoader, progress: Progress | None = None,
           cancel: threading.Event | None = None, *, attack: str, params: dict | None = None, seed: int = 0,
           tokenizer: str | None = None, normalize: str | None = None, measure: bool = True) -> list[Redetection]:
    """Attack each run's watermarked texts, then detect them with the run's method and tokenizer (and its clean
    texts, where not done yet, for the negatives), then measure each attacked text's ROUGE-L and encoder similarity
    to its clean text (unless `measure` is False). The attack, its parameters and each run's detection (its tokenizer loaded)
    are checked for every run before any work."""
    from fwsapp.robustness.attack_sets import attack_run, attack_size, check_attack

    checked_seed(seed)
    for run_id in run_ids:
        check_attack(store, run_id, attack, params or {})
    plans, tokenizers = _detection_plans(store, run_ids, None, None, tokenizer, normalize)
    steps = _per_run(progress, [attack_size(store, run_id, attack, params) for run_id in run_ids])
    attack_sets = {}
    for run_id, step in zip(run_ids, steps):
        if _cancelled(cancel):
            return []
        attack_sets[run_id] = attack_run(store, run_id, attack, params, seed, step, cancel, model_loader)
    if _cancelled(cancel):
        return []
    found = _detect_planned(store, plans, tokenizers, model_loader, progress, cancel, normalize, attack_sets)
    if measure and not _cancelled(cancel):
        from fwsapp.robustness.attack_sets import measure_changes

        for attack_set in attack_sets.values():
            measure_changes(store, attack_set)
    return found


def score(store: Store, run_ids: list[str], model_loader: ModelLoader, progress: Progress | None = None,
          cancel: threading.Event | None = None, *, metrics: tuple[str, ...] | None = None, oracle: str | None = None,
          alignscore_checkpoint: str | None = None, recognizer: str | None = None) -> dict[str, dict[str, int]]:
    """Compute the quality metrics each run lacks; returns, per run, how many sample × metric values each metric added
    (None: skipped, the perplexity of an imported run when no `oracle` is named). Progress counts the samples × metrics to
    compute, planned for every run before the first is scored: values already stored and metrics skipped are no work."""
    from fwsapp.quality.scoring import (QualityResources, check_metrics, planned_values, prepare_plan, score_run,
                                        scoring_plan)
    from fwsapp.quality.registry import default_metrics, unread_setting
    from fwsapp.entities.recognizers import DEFAULT_RECOGNIZER, check_recognizer

    metrics = tuple(metrics or default_metrics())
    check_metrics(metrics)
    if unread := unread_setting(metrics, oracle=oracle, alignscore_checkpoint=alignscore_checkpoint,
                                recognizer=recognizer):
        raise ValueError(unread)
    resources = QualityResources(model_loader, oracle=oracle, alignscore_checkpoint=alignscore_checkpoint, store=store,
                                 recognizer_name=check_recognizer(recognizer or DEFAULT_RECOGNIZER))
    said = progress or (lambda done, total, note="": None)
    said(0, 0, "finding the values each run lacks")
    plans = {run_id: scoring_plan(store, run_id, resources, metrics) for run_id in run_ids}
    said(0, 0, "loading what the metrics need")
    for run_id, plan in plans.items():
        prepare_plan(store, run_id, resources, plan)
    steps = _per_run(progress, [planned_values(plan) for plan in plans.values()])
    counts = {}
    for (run_id, plan), step in zip(plans.items(), steps):
        if _cancelled(cancel):
            break
        named = (lambda done, total, note="", step=step, run_id=run_id:
                 step(done, total, f"{run_id}: {note}" if note else "")) if step else None
        counts[run_id] = score_run(store, run_id, resources, progress=named, cancel=cancel, plan=plan)
    return counts


def judge_backend(model_loader: ModelLoader, kind: str, judge_model: str | None = None, base_url: str | None = None,
                  timeout: float = REQUEST_TIMEOUT_SECONDS, api_key: str | None = None):
    """The judge to ask: OpenAI, an OpenAI-compatible server, or a local model (loaded by `model_loader`)."""
    from fwsapp.judge.backends import JudgeError, make_backend
    from fwsapp.judge.registry import JUDGE_BACKENDS

    entry = JUDGE_BACKENDS[kind] if kind in JUDGE_BACKENDS else None  # an unknown kind: make_backend says so
    if entry and (unused := entry.unused_setting(base_url, api_key)):
        raise JudgeError(unused)  # before a model is loaded
    loaded = model_loader(judge_model or entry.default_model) if entry and entry.in_process else None
    return make_backend(kind, judge_model, base_url, timeout=timeout, loaded=loaded, api_key=api_key)


def judge(store: Store, run_ids: list[str], model_loader: ModelLoader, progress: Progress | None = None,
          cancel: threading.Event | None = None, *, backend, settings=None):
    """Judge every missing pair of the runs with `backend` (`judge_backend`); verdicts are written as they
    arrive. `model_loader` is unused: the backend holds its model."""
    from fwsapp.judge.runner import run_judge

    return run_judge(store, run_ids, backend, settings, progress=progress, cancel=cancel)


@dataclass
class Analysis:
    """What `analyze` did per run: texts whose entropies it stored (computed, or copied from a run over the
    same prompts; None: skipped, no model), and samples whose entities it analysed."""

    entropies: dict[str, int | None] = field(default_factory=dict)
    entities: dict[str, int] = field(default_factory=dict)
    facts: dict[str, int] = field(default_factory=dict)  # samples whose clinical facts it stored
    recognizer: str = ""

    @property
    def skipped(self) -> list[str]:
        return [run_id for run_id, count in self.entropies.items() if count is None]


def analyze(store: Store, run_ids: list[str], model_loader: ModelLoader, progress: Progress | None = None,
            cancel: threading.Event | None = None, *, entropy_model: str | None = None,
            threshold: float = HALLUCINATION_THRESHOLD, recognizer: str | None = None) -> Analysis:
    """Teacher-forced entropies (references; the texts of runs not generated here, imported or served, under
    `entropy_model`, since their generator is not loaded), disease entities of each run, found by the `recognizer`
    backend (default: the trained tagger), and every kind's clinical facts with their changes (diseases by the same
    recognizer); progress counts samples."""
    from fwsapp.models.encoder import DEFAULT_ENCODER, load_encoder
    from fwsapp.entities.introduced import analysis_config, analyze_run
    from fwsapp.entities.recognizers import DEFAULT_RECOGNIZER, check_recognizer, load_recognizer, recognizer_label
    from fwsapp.entities.entropy import compute_entropies, missing_texts
    from fwsapp.entities.fact_analysis import analyze_run_facts
    from fwsapp.entities.facts import FactFinder
    from fwsapp.store import generated_here

    if not 0 < threshold < 1:
        raise ValueError(f"The hallucination threshold must be between 0 and 1, not {threshold}.")
    recognizer_name = check_recognizer(recognizer or DEFAULT_RECOGNIZER)
    runs = [store.run(run_id) for run_id in run_ids]
    finder = FactFinder({"disease": recognizer_name})
    outcome = Analysis(recognizer=recognizer_label(recognizer_name))
    config = analysis_config(outcome.recognizer, DEFAULT_ENCODER, threshold)
    sizes = [store.count("generations", run["run_id"]) for run in runs]

    def entities_done(run_id: str, size: int) -> bool:
        return len(store.analysed_samples(run_id, config)) == size

    for run, size, step in zip(runs, sizes, _per_run(progress, sizes)):
        if _cancelled(cancel):
            break
        run_id, name = run["run_id"], run["model"] if generated_here(run) else entropy_model
        # What is stored already needs no model: a rerun with nothing to do loaded the recognizer, the encoder and
        # the language model (6 s of a grid's 6.5 s) to find every sample done. Asked again once the entropies are
        # stored, since a sample analysed without them is analysed again.
        lm = model_loader(name) if name and (missing_texts(store, run_id, name) or not entities_done(run_id, size)) \
            else None
        outcome.entropies[run_id] = compute_entropies(store, run_id, lm) if lm is not None else (0 if name else None)
        outcome.entities[run_id] = 0 if entities_done(run_id, size) else analyze_run(
            store, run_id, load_recognizer(recognizer_name), load_encoder(), lm.tokenizer if lm else None,
            threshold=threshold, progress=step, entropy_model=lm.name if lm else None)
        outcome.facts[run_id] = analyze_run_facts(store, run_id, finder, cancel=cancel)
        if step:
            step(size, size)
    return outcome


@dataclass
class GridOutcome:
    run_ids: list[str]
    failed: dict[str, str]  # run id -> reason
    scored: dict = field(default_factory=dict)
    analysis: Analysis | None = None
    judged: object = None
    judge_model: str | None = None  # the model that judged, as the judge step's outcome is told of
    attacked: list[Redetection] = field(default_factory=list)


def spec_executor(spec, address: str | None = None, server_key_env: str | None = None, device: str | None = None,
                  dtype: str | None = None):
    """Where a spec's runs are generated: through its [server]'s serving engine (its API key from the environment
    variable `server_key_env`), on the Ray cluster at `address`, or in this process (None)."""
    if server_key_env and not spec.server:
        raise ValueError(f"--server-key-env {server_key_env}: {spec.name} has no [server] to send a key to.")
    if spec.server and address:
        raise ValueError(f"{spec.name} generates through the serving engine at {spec.server.url}: it needs no Ray "
                         "cluster; leave out --ray.")
    if spec.server:
        from fwsapp.generation.serving import ServingEngine

        return ServingEngine(spec.server.url, server_key_env, spec.server.tokenizer, spec.server.concurrency)
    if address:
        from fwsapp.orchestration.distributed import RayExecutor

        return RayExecutor(address, device=device, dtype=dtype)
    return None


def grid(store: Store, spec, model_loader: ModelLoader, progress: Progress | None = None,
         cancel: threading.Event | None = None, executor=None, step_progress: Callable[[str], Progress] | None = None,
         api_key: str | None = None) -> GridOutcome:
    """A spec's runs (grid.load_spec), generated in this process or on `executor`, then its score, analyze, judge
    and attack steps on the runs that finished (attacks on those with watermarked texts), through the same steps as
    the CLI's. The judge runs here, on the driver,
    with its concurrent runner: API calls need no GPU. `step_progress(step name)` gives each later step's callback."""
    from fwsapp.judge.runner import JudgeSettings

    run_ids = generate(store, spec.runs, model_loader, progress, cancel, executor=executor)
    statuses = store.runs().set_index("run_id").loc[run_ids, ["status", "status_reason"]]
    failed = {run_id: reason or "failed" for run_id, (status, reason) in statuses.iterrows() if status == "failed"}
    finished = [run_id for run_id in run_ids if run_id not in failed]
    outcome = GridOutcome(run_ids, failed)
    step = step_progress or (lambda name: None)
    steps = spec.steps
    if steps.score and finished and not _cancelled(cancel):
        outcome.scored = score(store, finished, model_loader, step("score"), cancel, metrics=steps.score)
    if steps.analyze is not None and finished and not _cancelled(cancel):
        outcome.analysis = analyze(store, finished, model_loader, step("analyze"), cancel,
                                   threshold=steps.analyze.threshold, recognizer=steps.analyze.recognizer)
    if steps.judge is not None and finished and not _cancelled(cancel):
        asked = steps.judge
        backend = judge_backend(model_loader, asked.backend, asked.model, asked.base_url, asked.timeout, api_key)
        outcome.judge_model = backend.model
        outcome.judged = judge(store, finished, model_loader, step("judge"), cancel, backend=backend,
                               settings=JudgeSettings(concurrency=asked.concurrency, swap=asked.swap,
                                                      budget_usd=asked.budget, max_attempts=asked.max_attempts))
    watermarked = [run_id for run_id in finished if not methods.info(store.run(run_id)["method"]).post_hoc]
    for asked in steps.attack:
        if not watermarked or _cancelled(cancel):
            break
        outcome.attacked += attack(store, watermarked, model_loader, step("attack"), cancel, attack=asked.name,
                                   params=dict(asked.params), seed=asked.seed, normalize=asked.normalize)
    return outcome
