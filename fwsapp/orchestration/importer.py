"""Import published or MarkLLM logs: generations, detection scores and judge verdicts, as one run.

Every file is read and checked before anything is written, and the run is written in one transaction:
a malformed import gives one clear error and leaves the database as it was. Pickles are refused:
unpickling runs code from the file.
"""
from __future__ import annotations

import re

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from fwsapp import counted
from fwsapp.data.loaders import load_dataset
from fwsapp.data.tasks import strip_prompt, task
from fwsapp.data.values import finite_number, lone_surrogate, shown
from fwsapp.judge.records import PAPER_JUDGE, JudgedLogError, paper_judgments
from fwsapp.quality.scoring import text_metric_rows
from fwsapp.watermark import methods
from fwsapp.store import TEXT_COLUMNS, Store, detection_record

GENERATION_KEYS = ("watermarked_text", "unwatermarked_text", "natural_text")
DETECTION_KEYS = ("watermarked_scores", "unwatermarked_scores")
PICKLE_SUFFIXES = {".pkl", ".pickle", ".pk", ".p"}
NEGATIVE_KINDS = ("reference", "unwatermarked")


class ImportProblem(ValueError):
    """A log that cannot be imported; the message names the file and the problem."""


PAPER_MODELS = ("meditron", "biomistral", "jsl")  # the model names in the paper's log file names


def model_from_file_name(name: str) -> str | None:
    """The model a paper-style log file name declares (KGW-g0.5-d2-meditron-HQA2.generations.json), if one."""
    parts = {part.lower() for part in re.split(r"[-_.\s]+", name)}
    found = [model for model in PAPER_MODELS if model in parts]
    return found[0] if len(found) == 1 else None


@dataclass
class LogFile:
    """A log given as a path, or as uploaded bytes with their file name."""

    name: str
    content: bytes

    @classmethod
    def from_path(cls, path: str | Path) -> "LogFile":
        path = Path(path)
        try:
            return cls(path.name, path.read_bytes())
        except OSError as error:
            raise ImportProblem(f"{path}: cannot be read ({error.strerror}).") from None


def read_json(log: LogFile):
    if Path(log.name).suffix.lower() in PICKLE_SUFFIXES or log.content[:1] == b"\x80":
        raise ImportProblem(
            f"{log.name}: is a pickle. fwsapp never unpickles files, because unpickling runs code from the file. "
            "Convert it to JSON in a trusted session first (json.dump of the unpickled object)."
        )
    if not log.content.strip():
        raise ImportProblem(f"{log.name}: the file is empty.")
    try:
        text = log.content.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ImportProblem(f"{log.name}: is not UTF-8 JSON.") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        if error.msg == "Extra data":
            return _json_lines(log.name, text)
        raise ImportProblem(f"{log.name}: broken JSON at line {error.lineno}, column {error.colno}: {error.msg}.") from None
    except ValueError as error:  # an integer of more digits than Python converts (4,300)
        raise ImportProblem(f"{log.name}: holds a number too long to read ({error}).") from None


def _json_lines(name: str, text: str) -> list:
    """JSON Lines (one object per line), read as the list it stands for."""
    records = []
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as error:
                raise ImportProblem(f"{name}: neither one JSON value nor JSON Lines: line {number}, column "
                                    f"{error.colno}: {error.msg}.") from None
    return records


def _generations(log: LogFile) -> list[dict]:
    """A list of objects, or the column layout (an object of equal-length lists)."""
    records = read_json(log)
    if isinstance(records, dict):
        records = _columns_to_records(log.name, records)
    if not isinstance(records, list) or not records:
        raise ImportProblem(f"{log.name}: expected a non-empty JSON list of generations.")
    for number, record in enumerate(records, start=1):
        if not isinstance(record, dict):
            raise ImportProblem(f"{log.name}, row {number}: expected an object.")
        missing = [key for key in GENERATION_KEYS if key not in record]
        if missing:
            raise ImportProblem(f"{log.name}, row {number}: missing {', '.join(missing)}.")
        for key in GENERATION_KEYS + ("prompt",):
            if key in record and not isinstance(record[key], str):
                raise ImportProblem(f"{log.name}, row {number}: '{key}' must be text.")
            surrogate = lone_surrogate(record.get(key) or "")
            if surrogate is not None:  # valid JSON ("\ud800"), but no character: no tokenizer or database takes it
                raise ImportProblem(
                    f"{log.name}, row {number}: '{key}' holds a lone surrogate at character {surrogate + 1}, which is "
                    "no character. Replace it in the file (with U+FFFD, say) and import again; nothing was stored.")
    return records


def _columns_to_records(name: str, columns: dict) -> list[dict]:
    lists = {key: value for key, value in columns.items() if isinstance(value, list)}
    if not lists:
        raise ImportProblem(f"{name}: expected a JSON list of generations, or an object of equal-length lists.")
    lengths = {key: len(value) for key, value in lists.items()}
    if len(set(lengths.values())) > 1:
        described = ", ".join(f"{key}: {length}" for key, length in lengths.items())
        raise ImportProblem(f"{name}: the lists have unequal lengths ({described}).")
    count = next(iter(lengths.values()))
    return [{key: value[index] for key, value in lists.items()} for index in range(count)]


def _scores(log: LogFile) -> dict[str, list[float]]:
    data = read_json(log)
    if not isinstance(data, dict) or any(key not in data for key in DETECTION_KEYS):
        raise ImportProblem(f"{log.name}: expected {{\"watermarked_scores\": [...], \"unwatermarked_scores\": [...]}}.")
    for key in DETECTION_KEYS:
        values = data[key]
        if not isinstance(values, list) or not values:
            raise ImportProblem(f"{log.name}: '{key}' must be a non-empty list of numbers.")
        for position, value in enumerate(values, start=1):
            if finite_number(value) is None:
                raise ImportProblem(f"{log.name}: '{key}' item {position} is {shown(value)}, not a finite number that fits "
                                   "a float.")
    return {key: [float(value) for value in data[key]] for key in DETECTION_KEYS}


@dataclass(frozen=True)
class ReadLogs:
    """Logs read and checked, ready to store as one run: its id, its row of `runs` and its rows of each log's table."""
    run_id: str
    run: dict
    rows: dict[str, list[dict]]


def import_logs(store: Store, **logs) -> str:
    """Check and import any subset of the three logs as one run (`read_logs`'s arguments); returns its id. Importing
    the same files again changes nothing."""
    return store_logs(store, read_logs(**logs))


def store_logs(store: Store, read: ReadLogs) -> str:
    """Store logs read as their run, with the metrics its texts give alone, unless it is there: everything computed
    for the run since stays."""
    if not store.has_run(read.run_id):
        metrics = text_metric_rows(read.rows["generations"], read.run["task"])
        store.add_run(read.run_id, read.run, {**read.rows, "metrics": metrics})
    return read.run_id


def read_logs(
    *,
    method: str,
    model: str,
    task_name: str,
    generations: LogFile | None = None,
    detection: LogFile | None = None,
    judged: LogFile | None = None,
    dataset: str | Path | None = None,
    score_direction: str | None = None,
    negatives: str = "reference",
    judge_model: str = PAPER_JUDGE,
    params: dict | list[str] | None = None,
) -> ReadLogs:
    """Read and check any subset of the three logs as one run, touching no database: a log that is refused leaves
    nothing behind, not even an empty database.

    `negatives` says what the "unwatermarked" scores scored: the human reference (MarkLLM's "natural" mode,
    as in the paper's logs) or the unwatermarked output. `judge_model` is the model that wrote the judge log's
    verdicts. `params` are the watermark's settings the files' names do not carry (`KEY=VALUE` strings or a dict), such
    as the generator of a log made on a smaller GPU (`cuda_blocks=492`): every later stage (detection, attacks) reads
    them from the run.
    """
    method = methods.canonical_name(method)
    task(task_name)
    direction = score_direction or methods.info(method).score_direction
    if direction not in {"higher", "lower"}:
        raise ImportProblem(f"--score-direction must be 'higher' or 'lower', not {direction!r}.")
    if not (generations or detection or judged):
        raise ImportProblem("Give at least one of --generations, --detection and --judged.")
    if negatives not in NEGATIVE_KINDS:
        raise ImportProblem(f"--negatives must be 'reference' or 'unwatermarked', not {negatives!r}.")
    files = [log for log in (generations, detection, judged) if log]
    named, given = settings_in_names(method, [log.name for log in files]), given_settings(method, params or {})
    if conflicting := sorted(key for key in set(named) & set(given) if named[key] != given[key]):
        raise ImportProblem(f"The files' names say {', '.join(f'{key}={named[key]:g}' for key in conflicting)}, but "
                            f"the settings given say {', '.join(f'{key}={given[key]}' for key in conflicting)}: give "
                            "the files' settings, or files named for the settings given.")
    defaults = methods.info(method).defaults
    given = {key: value for key, value in given.items() if key not in named and value != defaults[key]}
    judge_model = " ".join(str(judge_model or "").split())
    if judged and not judge_model:
        raise ImportProblem("Name the judge model that wrote the judge log (the paper's is gpt-4o).")

    records = _generations(generations) if generations else []
    scores = _scores(detection) if detection else None
    judgments = []
    if judged:
        data = read_json(judged)
        if not isinstance(data, list) or not data:
            raise ImportProblem(f"{judged.name}: expected a non-empty JSON list of judged samples.")
        try:
            judgments = paper_judgments(data, judged.name, len(records) if records else None, judge_model)
        except JudgedLogError as error:
            raise ImportProblem(str(error)) from None
    prompts = _prompts(records, dataset, task_name)

    generation_rows = [
        {
            "sample_idx": index,
            "prompt": prompts[index],
            "reference": record["natural_text"],
            "watermarked_text": strip_prompt(record["watermarked_text"], prompts[index]),
            "unwatermarked_text": strip_prompt(record["unwatermarked_text"], prompts[index]),
        }
        for index, record in enumerate(records)
    ]
    detection_rows, alignment = [], {}
    if scores:
        kinds = {"watermarked_scores": "watermarked", "unwatermarked_scores": negatives}
        for key, kind in kinds.items():
            indices, alignment[key] = _score_rows(generation_rows, kind, scores[key], generations, detection, key)
            for index, value in zip(indices, scores[key]):
                statistic = {"p": value} if direction == "lower" else {"z": value}
                detection_rows.append(detection_record(index, kind, method, value, **statistic))

    identity = {
        "imported": True, "method": method, "model": model, "task": task_name, "score_direction": direction,
        "files": {log.name: hashlib.sha256(log.content).hexdigest() for log in files},
    }
    if scores:
        identity["negatives"] = negatives
        identity["detection_alignment"] = alignment
    if judged and judge_model != PAPER_JUDGE:  # the paper's judge stays implicit, so earlier imports keep their ids
        identity["judge_model"] = judge_model
    # As the judge: settings given change the run (other green lists); those at their default or in the names are no
    # setting given, so a log has one run however it is imported, and earlier imports keep their ids.
    if given:
        identity["params"] = given
    run_id = "imp-" + hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:8]
    n = max(len(records), len(scores["watermarked_scores"]) if scores else 0, len(judgments))
    return ReadLogs(
        run_id,
        {
            "config": identity, "model": model, "task": task_name, "method": method, "params": {**named, **given},
            "n": n, "imported": True, "score_direction": direction, "status": "done",
        },
        {"generations": generation_rows, "detections": detection_rows, "judgments": judgments},
    )


# The paper's log names carry the green-list settings: KGW-g0.5-d2-meditron-HQA.generations.json.
SETTINGS_IN_NAME = re.compile(r"(?:^|[-_])g(?P<gamma>\d+(?:\.\d+)?)-d(?P<delta>\d+(?:\.\d+)?)(?=[-_.]|$)")


def settings_in_names(method: str, names: list[str]) -> dict:
    """The settings the files' names record (γ and δ, as the paper names its logs), for a method that has them; none
    where the names say nothing or disagree."""
    found = [{key: float(value) for key, value in match.groupdict().items()}
             for name in names if (match := SETTINGS_IN_NAME.search(name))]
    declared = methods.info(method).params
    if not found or any(settings != found[0] for settings in found) or not set(found[0]) <= set(declared):
        return {}
    return found[0]


def given_settings(method: str, params: dict | list[str]) -> dict:
    """The settings given beside the files, typed and checked as a run's are (a key given as `$VAR` recorded with its
    fingerprint)."""
    info = methods.info(method)
    given = info.typed_params(methods.parse_params(method, params))
    info.checked_params(given)
    return given


def _score_rows(rows: list[dict], kind: str, values: list[float], generations: LogFile | None,
                detection: LogFile | None, key: str) -> tuple[list[int], str]:
    """The sample each score belongs to. MarkLLM skips texts with nothing to score (an empty generated
    part), so a list as long as the non-empty texts pairs with those; a full list pairs one to one."""
    if not rows:
        return list(range(len(values))), "by position (no generations)"
    if len(values) == len(rows):
        return list(range(len(rows))), "one score per generation"
    non_empty = [row["sample_idx"] for row in rows if row[TEXT_COLUMNS[kind]].split()]
    if len(values) == len(non_empty):
        return non_empty, f"skips the {counted(len(rows) - len(non_empty), f'empty {kind} text', f'empty {kind} texts')}, as MarkLLM does"
    hint = ""
    if key == "unwatermarked_scores":
        other = "unwatermarked" if kind == "reference" else "reference"
        hint = f" If they scored the {other} texts, pass --negatives {other}."
    raise ImportProblem(
        f"{detection.name}: '{key}' has {counted(len(values), 'score', 'scores')} but {generations.name} has "
        f"{counted(len(rows), 'generation', 'generations')} ({len(non_empty)} with {kind} text), so the scores cannot be "
        f"paired with these texts.{hint}"
    )


def _prompts(records: list[dict], dataset: str | Path | None, task_name: str) -> list[str]:
    """Each generation's prompt: its own, else the dataset's by index, else empty."""
    aligned = [sample.prompt for sample in load_dataset(task_name, dataset)] if dataset else []
    if dataset and len(aligned) < len(records):
        raise ImportProblem(f"{dataset}: has {len(aligned)} samples, fewer than the {len(records)} generations.")
    return [record.get("prompt") or (aligned[index] if aligned else "") for index, record in enumerate(records)]
