"""Judge verdicts as stored rows, and the paper's judged-log layout read into them.

The paper's layout is a JSON list of {sample_id, prompt, w_output, uw_output, judge_output, randomized,
judge_choice, scores_U, scores_W}. `randomized` true means answer A was the unwatermarked text.
Scores come from scores_U/scores_W, or are parsed from judge_output when those are missing.
"""
from __future__ import annotations

import hashlib
import json

from fwsapp.data.values import finite_number, shown
from fwsapp.judge.parser import parse_verdict

PAPER_JUDGE = "gpt-4o"  # the judge behind the paper's logs: imported verdicts are filed under it unless another is named
PAPER_PROMPT_VERSION = "paper"
PAPER_KEYS = ("sample_id", "w_output", "uw_output", "judge_output")


class JudgedLogError(ValueError):
    def __init__(self, source: str, problem: str, row: int | None = None):
        where = f"{source}, row {row}" if row is not None else source
        super().__init__(f"{where}: {problem}")


def texts_hash(watermarked: str, unwatermarked: str) -> str:
    """Identifies the pair judged, so a changed text is judged again and an unchanged one never."""
    return hashlib.sha256(json.dumps([watermarked, unwatermarked]).encode()).hexdigest()[:16]


def _truthy(value) -> bool:
    return value if isinstance(value, bool) else str(value).strip().lower() in {"true", "1", "yes"}


def _scores(value, source: str, row: int, field: str) -> list[float] | None:
    if value is None or value == "":
        return None
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            raise JudgedLogError(source, f"'{field}' is not a list of three numbers: {value!r}", row) from None
    numbers = [finite_number(item) for item in value] if isinstance(value, list) else []
    if len(numbers) != 3 or None in numbers:
        raise JudgedLogError(source, f"'{field}' must be a list of three numbers that fit a float, not {shown(value)}", row)
    if not all(number.is_integer() and 1 <= number <= 5 for number in numbers):
        raise JudgedLogError(source, f"'{field}' scores must be whole numbers from 1 to 5, not {shown(value)}", row)
    return numbers


def _sample_id(value, source: str, row: int, limit: int | None, seen: set[int]) -> int:
    """A unique non-negative whole number, below the number of generations when they are known."""
    text = str(value).strip()
    if isinstance(value, bool) or not text.isdigit() or (isinstance(value, float) and not value.is_integer()):
        raise JudgedLogError(source, f"sample_id {value!r} must be a whole number ≥ 0", row)
    sample_idx = int(text)
    if limit is not None and sample_idx >= limit:
        raise JudgedLogError(source, f"sample_id {sample_idx} is beyond the {limit} generations (ids 0–{limit - 1})", row)
    if sample_idx >= 2**31:
        raise JudgedLogError(source, f"sample_id {sample_idx} is too large", row)
    if sample_idx in seen:
        raise JudgedLogError(source, f"sample_id {sample_idx} appears twice", row)
    seen.add(sample_idx)
    return sample_idx


def paper_judgments(records: list, source: str, samples: int | None = None, judge_model: str = PAPER_JUDGE) -> list[dict]:
    """Judgment rows from the paper's layout, filed under `judge_model`, the model that wrote them; raises
    JudgedLogError naming the row on any problem. `samples`: how many generations the run has, which sample ids
    must stay below."""
    rows, seen = [], set()
    for number, record in enumerate(records, start=1):
        if not isinstance(record, dict):
            raise JudgedLogError(source, "expected an object per sample", number)
        missing = [key for key in PAPER_KEYS if key not in record]
        if missing:
            raise JudgedLogError(source, f"missing {', '.join(missing)}", number)
        sample_idx = _sample_id(record["sample_id"], source, number, samples, seen)
        watermarked_first = not _truthy(record.get("randomized", False))
        scores_w = _scores(record.get("scores_W"), source, number, "scores_W")
        scores_u = _scores(record.get("scores_U"), source, number, "scores_U")
        status, reason = "ok", None
        if scores_w is None or scores_u is None:
            verdict = parse_verdict(record["judge_output"])
            if verdict.ok:
                first, second = list(verdict.a), list(verdict.b)
                scores_w, scores_u = (first, second) if watermarked_first else (second, first)
            else:
                status, reason, scores_w, scores_u = "failed", verdict.reason, None, None
        rows.append({
            "sample_idx": sample_idx,
            "judge_model": judge_model,
            "prompt_version": PAPER_PROMPT_VERSION,
            "watermarked_first": watermarked_first,
            "texts_hash": texts_hash(str(record["w_output"]), str(record["uw_output"])),
            "backend": "import",
            "raw_output": record["judge_output"],
            "status": status,
            "reason": reason,
            "scores_watermarked": scores_w,
            "scores_unwatermarked": scores_u,
        })
    return rows
