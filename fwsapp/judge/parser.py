"""Parse a judge's final verdict: `[[A]]: [c, r, f]` and `[[B]]: [c, r, f]`, Likert 1-5, or the same scores as
structured output (`VERDICT_SCHEMA`: {"explanation": …, "A": [c, r, f], "B": [c, r, f]}).

Tolerant of how models actually answer (markdown bold, code fences, extra spaces, "[[A]]: 4, 5, 5",
trailing text), strict about what matters: exactly three scores per answer, each within 1-5. Anything
else is a failed parse with a reason; a score is never guessed.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass

LIKERT_MIN, LIKERT_MAX = 1, 5
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")

# The verdict as a JSON schema, for servers that constrain their output to one (OpenAI's structured outputs, vLLM's
# guided decoding, llama.cpp's json_schema): the reasoning first, as the prompt asks, then each answer's scores in the
# order coherence, relevance, factual accuracy.
_SCORES = {"type": "array", "items": {"type": "integer", "minimum": LIKERT_MIN, "maximum": LIKERT_MAX},
           "minItems": 3, "maxItems": 3}
VERDICT_SCHEMA = {"type": "object", "properties": {"explanation": {"type": "string"}, "A": _SCORES, "B": _SCORES},
                  "required": ["explanation", "A", "B"], "additionalProperties": False}


@dataclass(frozen=True)
class Verdict:
    ok: bool
    a: tuple[float, float, float] | None = None
    b: tuple[float, float, float] | None = None
    reason: str | None = None


def _label_scores(text: str, label: str) -> tuple[tuple[float, ...] | None, str | None]:
    pattern = re.compile(r"\[\[\s*" + label + r"\s*\]\]\s*:?\s*(.*)")
    matches = [match.group(1) for line in text.splitlines() if (match := pattern.search(line))]
    if not matches:
        return None, f"no [[{label}]] verdict line"
    rest = matches[-1]  # the final verdict comes last
    bracket = re.match(r"\s*\[([^\]]*)\]", rest)
    body = bracket.group(1) if bracket else rest
    numbers = _NUMBER.findall(body)
    if bracket and len(numbers) != 3:
        return None, f"[[{label}]] has {len(numbers)} scores, expected 3"
    if len(numbers) < 3:
        return None, f"[[{label}]] has {len(numbers)} scores, expected 3"
    scores = tuple(float(number) for number in numbers[:3])
    outside = [score for score in scores if not LIKERT_MIN <= score <= LIKERT_MAX]
    if outside:
        return None, f"[[{label}]] score {outside[0]:g} is outside {LIKERT_MIN}-{LIKERT_MAX}"
    return scores, None


def _structured(text: str) -> Verdict | None:
    """A verdict written as `VERDICT_SCHEMA` JSON; None when the text is not a JSON object."""
    try:
        verdict = json.loads(text)
    except ValueError:
        return None
    if not isinstance(verdict, dict):
        return None
    scores, reasons = {}, []
    for label in ("A", "B"):
        values = verdict.get(label)
        if not isinstance(values, list) or len(values) != 3 or not all(
                isinstance(value, (int, float)) and not isinstance(value, bool) for value in values):
            reasons.append(f"{label} is not a list of 3 scores")
        elif outside := [value for value in values if not LIKERT_MIN <= value <= LIKERT_MAX]:
            reasons.append(f"{label} score {outside[0]:g} is outside {LIKERT_MIN}-{LIKERT_MAX}")
        else:
            scores[label] = tuple(float(value) for value in values)
    if reasons:
        return Verdict(False, reason="; ".join(reasons))
    return Verdict(True, a=scores["A"], b=scores["B"])


def parse_verdict(output: str | None) -> Verdict:
    if not output or not output.strip():
        return Verdict(False, reason="empty output")
    fenced = re.fullmatch(r"\s*(?:```(?:json)?)?\s*(\{.*\})\s*(?:```)?\s*", output, re.DOTALL)
    if fenced and (structured := _structured(fenced.group(1))) is not None:
        return structured
    text = output.replace("*", "").replace("`", "")
    a, reason_a = _label_scores(text, "A")
    b, reason_b = _label_scores(text, "B")
    if reason_a or reason_b:
        return Verdict(False, reason="; ".join(reason for reason in (reason_a, reason_b) if reason))
    return Verdict(True, a=a, b=b)
