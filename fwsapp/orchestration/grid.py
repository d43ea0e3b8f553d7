"""Experiments as one spec file (TOML): the grid of runs, and the steps that follow generation.

    [grid]                       models, tasks, seeds, n, max_new_tokens, batch_size, datasets (task -> file)
    [server]                     url, tokenizer, concurrency: the runs generated through that serving engine, [grid]
                                 models being the names it serves (its API key: the command line's --server-key-env)
    [[method]]                   name, params; a list value is a sweep: params = { delta = [1.0, 2.0] } is two runs
    [steps]                      score = [metrics], analyze = { recognizer, threshold },
                                 judge = { backend, base_url, model, concurrency, swap, timeout, budget },
                                 attack = [{ name, params, seed, normalize }]: a list value in params is a sweep

Every key and value is checked before any work starts; a bad one is one line naming it. A run is a RunConfig, so
its id is the same as the one `generate` gives for the same settings, and a rerun of a spec finds what is stored.
"""
from __future__ import annotations

import itertools
import math
import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path

import pandas as pd

from fwsapp.entities.introduced import HALLUCINATION_THRESHOLD
from fwsapp.generation.run_config import RunConfig
from fwsapp.judge.registry import CONCURRENT_REQUESTS, REQUEST_TIMEOUT_SECONDS
from fwsapp.plugins import checked_seed
from fwsapp.watermark import methods
from fwsapp.paths import DEMO_DATA_DIR, PROJECT_DIR, UPLOADS_DIR

GRID_KEYS = {"models", "tasks", "seeds", "n", "max_new_tokens", "batch_size", "datasets"}
METHOD_KEYS = {"name", "params"}
STEP_KEYS = {"score", "analyze", "judge", "attack"}


# A spec past this many runs is refused unless the caller says yes (`grid --yes`): a typo in a sweep can ask for
# a million runs, and even their dry run takes long.
MAX_RUNS = 10_000


class SpecError(ValueError):
    """A spec that cannot run; the message names the file and the key."""


@dataclass(frozen=True)
class AnalyzeStep:
    """[steps] analyze: the disease recognizer (default: the registry's) and the threshold. No entropy model: a grid's
    runs are generated, and their entropies are their own model's."""

    recognizer: str | None = None
    threshold: float = HALLUCINATION_THRESHOLD


@dataclass(frozen=True)
class JudgeStep:
    """[steps] judge: a registered backend and how to ask it, with the judge's declared defaults."""

    backend: str
    model: str | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    concurrency: int = CONCURRENT_REQUESTS
    swap: bool = False
    timeout: float = REQUEST_TIMEOUT_SECONDS
    budget: float | None = None
    max_attempts: int = 6  # tries per request before a pair is unreachable, as `judge --max-attempts`


@dataclass(frozen=True)
class AttackStep:
    """One attack of [steps] attack: a registered attack, its checked parameters (one setting of a sweep), the seed
    and the normaliser detection applies."""

    name: str
    params: tuple[tuple[str, object], ...] = ()
    seed: int = 0
    normalize: str | None = None


ANALYZE_KEYS = {item.name for item in fields(AnalyzeStep)}
JUDGE_KEYS = {item.name for item in fields(JudgeStep)}
ATTACK_KEYS = {item.name for item in fields(AttackStep)}


@dataclass(frozen=True)
class Steps:
    score: tuple[str, ...] = ()
    analyze: AnalyzeStep | None = None
    judge: JudgeStep | None = None
    attack: tuple[AttackStep, ...] = ()

    def names(self) -> list[str]:
        """The steps the spec asks for, in the order they run."""
        return [name for name, asked in (("score", bool(self.score)), ("analyze", self.analyze is not None),
                                          ("judge", self.judge is not None), ("attack", bool(self.attack))) if asked]


@dataclass(frozen=True)
class ServerSetting:
    """[server]: the OpenAI-compatible serving engine that generates the runs."""

    url: str
    tokenizer: str | None = None
    concurrency: int = 8


@dataclass
class Spec:
    name: str
    runs: list[RunConfig]
    steps: Steps = field(default_factory=Steps)
    server: ServerSetting | None = None

    def loads_model_here(self) -> bool:
        """Whether running the spec loads a language model in this process or on its Ray workers (where --device and
        --dtype apply): always where it generates here; through a [server], only for a detector that reads the model,
        a judge on the local backend or an attack that loads one. Served runs have no generator here, so the score
        step gives them no perplexity and the analyze step no entropies (neither names a model)."""
        from fwsapp.judge.registry import JUDGE_BACKENDS
        from fwsapp.robustness.attacks import ATTACKS

        if self.server is None:
            return True
        return (any(methods.info(run.method).detector_needs_model(run.params) for run in self.runs)
                or bool(self.steps.judge and JUDGE_BACKENDS[self.steps.judge.backend].in_process)
                or any(ATTACKS[attack.name].reads_model(dict(attack.params)) for attack in self.steps.attack))


def load_spec(source: str | Path, text: str | None = None, allow_large: bool = False) -> Spec:
    """A spec from a file, or from `text` (an upload) named `source`. A file's dataset paths are relative to it; an
    upload's, to the project, and they may name only the shipped data (data/…) or files uploaded to this app
    (cache/uploads/…): an upload never reads the server's other files. More than MAX_RUNS runs need `allow_large`."""
    name = str(source)
    try:
        content = text if text is not None else Path(source).read_text(encoding="utf-8")
        raw = tomllib.loads(content.removeprefix("\ufeff"))  # a byte-order mark, as editors on Windows write it
    except FileNotFoundError:
        raise SpecError(f"{name}: no such file.") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise SpecError(f"{name}: not valid TOML ({error}).") from None
    base = Path(source).parent if text is None else PROJECT_DIR
    _known(name, "the spec", raw, {"grid", "method", "steps", "server"})
    server = _server(name, raw)
    grid = _table(name, raw, "grid", required=True)
    _known(name, "[grid]", grid, GRID_KEYS)
    methods = raw.get("method")
    if not isinstance(methods, list) or not methods or not all(isinstance(entry, dict) for entry in methods):
        raise SpecError(f"{name}: it needs at least one [[method]] table with a name.")
    models = _strings(name, grid, "models")
    tasks = _strings(name, grid, "tasks")
    seeds = _integers(name, grid, "seeds", default=[42])
    sizes = {key: _integer(name, grid, key, default) for key, default in
             (("n", 4), ("max_new_tokens", 64), ("batch_size", 4))}
    datasets = _table(name, grid, "datasets")
    from fwsapp.data.tasks import TASKS

    for task in tasks + list(datasets):
        if task not in TASKS:
            raise SpecError(f"{name}: task '{task}' is not one of {', '.join(TASKS)}.")
    for task in datasets:
        if task not in tasks:
            raise SpecError(f"{name}: [grid.datasets] names {task}, which is not in [grid] tasks: add the task, or "
                            "remove the entry.")
    sweeps = []
    for number, entry in enumerate(methods, 1):
        _known(name, f"[[method]] {number}", entry, METHOD_KEYS)
        if not isinstance(entry.get("name"), str):
            raise SpecError(f"{name}: [[method]] {number} needs a name (a string).")
        params = _table(name, entry, "params")
        swept = {key: value if isinstance(value, list) else [value] for key, value in params.items()}
        for key, values in swept.items():
            if not values:
                raise SpecError(f"{name}: [[method]] {number} ({entry['name']}) {key} is an empty sweep: give a value "
                                "or a list of values.")
        sweeps.append((number, entry, swept))
    count = sum(math.prod(map(len, swept.values())) for _, _, swept in sweeps) * len(models) * len(tasks) * len(seeds)
    if count > MAX_RUNS and not allow_large:
        raise SpecError(f"{name}: the grid makes {count:,} runs, more than {MAX_RUNS:,}: check its sweeps, or pass "
                        "--yes to go on.")
    runs = []
    for number, entry, swept in sweeps:
        for values, model, task, seed in itertools.product(itertools.product(*swept.values()), models, tasks, seeds):
            dataset = _dataset_path(name, base, task, datasets[task], uploaded=text is not None) if task in datasets else "demo"
            try:
                config = RunConfig(task=task, method=entry["name"], dataset=dataset, model=model,
                                   params=dict(zip(swept, values)), seed=seed, server=server and server.url,
                                   tokenizer=server and server.tokenizer, **sizes)
                config.samples()
            except (ValueError, OSError) as error:
                raise SpecError(f"{name}: [[method]] {number} ({entry['name']}), {task}: {error}") from None
            runs.append(config)
    return Spec(name=name, runs=list({config.run_id(): config for config in runs}.values()),
                steps=_steps(name, raw, allow_large), server=server)


def _server(name: str, raw: dict) -> ServerSetting | None:
    from fwsapp.network import checked_server_url

    server = _table(name, raw, "server")
    if not server:
        return None
    _known(name, "[server]", server, {"url", "tokenizer", "concurrency"})
    for key in ("url", "tokenizer"):
        _text(name, "[server]", server, key)
    if not server.get("url"):
        raise SpecError(f"{name}: [server] needs url, the serving engine's base URL (e.g. http://localhost:8000/v1).")
    try:
        checked_server_url(server["url"], "url")
    except ValueError as error:
        raise SpecError(f"{name}: [server] {error}") from None
    if "concurrency" in server and (type(server["concurrency"]) is not int or server["concurrency"] < 1):
        raise SpecError(f"{name}: [server] concurrency must be a whole number of at least 1, not {server['concurrency']!r}.")
    return ServerSetting(**server)


def _dataset_path(name: str, base: Path, task: str, value, uploaded: bool) -> str:
    if not isinstance(value, str) or not value.strip():
        raise SpecError(f"{name}: [grid.datasets] {task} must be a file path (a string), not {value!r}.")
    path = (base / value).resolve()
    if uploaded and not any(path.is_relative_to(root.resolve()) for root in (DEMO_DATA_DIR, UPLOADS_DIR)):
        raise SpecError(f"{name}: [grid.datasets] {task}: an uploaded spec may name only the shipped data (data/…) or "
                        "datasets uploaded to this app (cache/uploads/…), not other files of the server.")
    return str(path)


def _steps(name: str, raw: dict, allow_large: bool = False) -> Steps:
    from fwsapp.judge.registry import JUDGE_BACKENDS
    from fwsapp.judge.runner import unkept_budget
    from fwsapp.quality.registry import METRICS
    from fwsapp.entities.recognizers import recognizers_of

    steps = _table(name, raw, "steps")
    _known(name, "[steps]", steps, STEP_KEYS)
    score = steps.get("score", [])
    if not isinstance(score, list) or not all(isinstance(metric, str) and metric in METRICS for metric in score):
        raise SpecError(f"{name}: [steps] score must be a list of {', '.join(METRICS.names())}.")
    analyze = steps.get("analyze")
    if analyze is True:
        analyze = {}
    if analyze is not None and analyze is not False:
        if not isinstance(analyze, dict):
            raise SpecError(f"{name}: [steps] analyze is true or a table of {', '.join(sorted(ANALYZE_KEYS))}.")
        _known(name, "[steps] analyze", analyze, ANALYZE_KEYS)
        _choice(name, "[steps] analyze", analyze, "recognizer", recognizers_of("disease"))
        _number(name, "[steps] analyze", analyze, "threshold", low=0, high=1)
    judge = steps.get("judge")
    if judge is not None:
        if not isinstance(judge, dict):
            raise SpecError(f"{name}: [steps] judge must be a table with backend = one of {', '.join(JUDGE_BACKENDS.names())}.")
        _known(name, "[steps] judge", judge, JUDGE_KEYS)
        _choice(name, "[steps] judge", judge, "backend", JUDGE_BACKENDS.names(), required=True)
        for key in ("base_url", "model", "api_key_env"):
            _text(name, "[steps] judge", judge, key)
        entry = JUDGE_BACKENDS[judge["backend"]]
        if unused := entry.unused_setting(judge.get("base_url"), judge.get("api_key_env")):
            raise SpecError(f"{name}: [steps] judge: {unused}")
        if "base_url" in entry.needs and not (judge.get("base_url") and judge.get("model")):
            raise SpecError(f"{name}: [steps] judge with backend '{judge['backend']}' needs base_url and model (the "
                            "server's address and the model name it serves).")
        if "max_attempts" in judge and (type(judge["max_attempts"]) is not int or judge["max_attempts"] < 1):
            raise SpecError(f"{name}: [steps] judge max_attempts must be a whole number of at least 1, not "
                            f"{judge['max_attempts']!r}.")
        if "concurrency" in judge and (type(judge["concurrency"]) is not int or judge["concurrency"] < 1):
            raise SpecError(f"{name}: [steps] judge concurrency must be a whole number of at least 1, not "
                            f"{judge['concurrency']!r}.")
        if "swap" in judge and not isinstance(judge["swap"], bool):
            raise SpecError(f"{name}: [steps] judge swap must be true or false, not {judge['swap']!r}.")
        _number(name, "[steps] judge", judge, "timeout", low=0, open_low=True)
        _number(name, "[steps] judge", judge, "budget", low=0)
        if unkept := unkept_budget(judge.get("model") or entry.default_model, judge.get("budget")):
            raise SpecError(f"{name}: [steps] judge: {unkept}")
    return Steps(score=tuple(score), analyze=AnalyzeStep(**analyze) if isinstance(analyze, dict) else None,
                 judge=JudgeStep(**judge) if judge is not None else None, attack=_attacks(name, steps.get("attack", []), allow_large))


def _attacks(name: str, listed, allow_large: bool = False) -> tuple[AttackStep, ...]:
    """[steps] attack: each entry's settings, a list value in its params swept, every one checked against the attack
    registry."""
    from fwsapp.robustness.attacks import ATTACKS
    from fwsapp.detection.normalizers import NORMALIZERS

    if not isinstance(listed, list) or not all(isinstance(entry, dict) for entry in listed):
        raise SpecError(f"{name}: [steps] attack must be a list of tables, each with name = one of "
                        f"{', '.join(ATTACKS.names())}.")
    found = []
    for number, entry in enumerate(listed, 1):
        where = f"[steps] attack {number}"
        _known(name, where, entry, ATTACK_KEYS)
        _choice(name, where, entry, "name", ATTACKS.names(), required=True)
        _choice(name, where, entry, "normalize", NORMALIZERS)
        if "seed" in entry:
            _seed(name, f"{where} seed", entry["seed"])
        params = _table(name, entry, "params")
        swept = {key: value if isinstance(value, list) else [value] for key, value in params.items()}
        if any(not values for values in swept.values()):
            raise SpecError(f"{name}: {where} has an empty sweep: give a value or a list of values.")
        settings = math.prod(map(len, swept.values()))
        if settings > MAX_RUNS and not allow_large:
            raise SpecError(f"{name}: {where} makes {settings:,} attack settings, more than {MAX_RUNS:,}: check its "
                            "sweeps, or pass --yes to go on.")
        for values in itertools.product(*swept.values()):
            try:
                checked = ATTACKS[entry["name"]].checked_params(dict(zip(swept, values)))
            except ValueError as error:
                raise SpecError(f"{name}: {where}: {error}") from None
            found.append(AttackStep(entry["name"], tuple(sorted(checked.items())), entry.get("seed", 0),
                                    entry.get("normalize")))
    return tuple(found)


def _choice(name: str, where: str, table: dict, key: str, choices, required: bool = False) -> None:
    if (key in table or required) and (not isinstance(table.get(key), str) or table[key] not in choices):
        raise SpecError(f"{name}: {where} {key} must be one of {', '.join(choices)}, not {table.get(key)!r}.")


def _text(name: str, where: str, table: dict, key: str) -> None:
    if key in table and (not isinstance(table[key], str) or not table[key].strip()):
        raise SpecError(f"{name}: {where} {key} must be text, not {table[key]!r}.")


def _number(name: str, where: str, table: dict, key: str, low: float, high: float | None = None,
            open_low: bool = False) -> None:
    """A number, not a string or a bool (a string "0.5" passed the dry run and crashed the run after generation)."""
    if key not in table:
        return
    value = table[key]
    numeric = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if not numeric or (value <= low if open_low else value < low) or (high is not None and value > high):
        bounds = f"{'above' if open_low else 'at least'} {low:g}" + (f" and at most {high:g}" if high is not None else "")
        raise SpecError(f"{name}: {where} {key} must be a number {bounds}, not {value!r}.")


def _known(name: str, where: str, table: dict, keys: set[str]) -> None:
    for key in table:
        if key not in keys:
            raise SpecError(f"{name}: {where} has no key '{key}'; its keys are {', '.join(sorted(keys))}.")


def _table(name: str, parent: dict, key: str, required: bool = False) -> dict:
    value = parent.get(key, None if required else {})
    if not isinstance(value, dict):
        raise SpecError(f"{name}: '{key}' must be a table" + (" (it is missing)." if value is None else "."))
    return value


def _strings(name: str, grid: dict, key: str) -> list[str]:
    value = grid.get(key)
    if not isinstance(value, list) or not value or not all(isinstance(item, str) for item in value):
        raise SpecError(f"{name}: [grid] {key} must be a non-empty list of strings.")
    return value


def _integers(name: str, grid: dict, key: str, default: list[int]) -> list[int]:
    value = grid.get(key, default)
    if not isinstance(value, list) or not value or not all(type(item) is int for item in value):
        raise SpecError(f"{name}: [grid] {key} must be a non-empty list of integers.")
    for item in value:
        _seed(name, f"[grid] {key}", item)
    return value


def _seed(name: str, where: str, value) -> int:
    try:
        return checked_seed(value, where)
    except ValueError as error:
        raise SpecError(f"{name}: {error}") from None


def _integer(name: str, grid: dict, key: str, default: int) -> int:
    value = grid.get(key, default)
    if type(value) is not int or value < 1:
        raise SpecError(f"{name}: [grid] {key} must be a positive integer, not {value!r}.")
    return value


def plan(spec: Spec, store=None) -> pd.DataFrame:
    """One row per run: its settings (as every page names a run's: what sets them apart from the method's defaults,
    its strength always named), what is stored and the units (batches) still to generate. `store` may be
    None (no database yet: everything is missing)."""
    rows = []
    for config in spec.runs:
        run_id = config.run_id()
        stored = store.finished_samples(run_id) if store is not None and store.has_run(run_id) else set()
        batches = [range(start, min(start + config.batch_size, config.n)) for start in range(0, config.n, config.batch_size)]
        missing = [batch for batch in batches if not all(index in stored for index in batch)]
        rows.append({"run": run_id, "model": config.model, "task": config.task, "method": config.method,
                     "settings": methods.info(config.method).settings(config.params), "seed": config.seed,
                     "n": config.n, "samples stored": len(stored), "units missing": len(missing), "units": len(batches)})
    return pd.DataFrame(rows)
