"""Parse a judge's final verdict: `[[A]]: [c, r, f]` and `[[B]]: [c, r, f]`, Likert 1-5.

Tolerant of how models actually answer (markdown bold, code fences, extra spaces, "[[A]]: 4, 5, 5",
trailing text), strict about what matters: exactly three scores per answer, each within 1-5. Anything
else is a failed parse with a reason; a score is never guessed.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

LIKERT_MIN, LIKERT_MAX = 1, 5
ASPECTS = ("coherence", "relevance", "factual_accuracy")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


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


def parse_verdict(output: str | None) -> Verdict:
    if not output or not output.strip():
        return Verdict(False, reason="empty output")
    text = output.replace("*", "").replace("`", "")
    a, reason_a = _label_scores(text, "A")
    b, reason_b = _label_scores(text, "B")
    if reason_a or reason_b:
        return Verdict(False, reason="; ".join(reason for reason in (reason_a, reason_b) if reason))
    return Verdict(True, a=a, b=b)
