import pytest

from fwsapp.judge.parser import parse_verdict
from fwsapp.judge.prompts import PROMPT_VERSION, messages, template_text


@pytest.mark.parametrize(
    "output, a, b",
    [
        ("[[A]]: [4, 5, 5]\n[[B]]: [2, 3, 1]", (4, 5, 5), (2, 3, 1)),
        ("Reasoning...\n```\n[[A]]: [4, 4, 5]\n[[B]]: [2, 2, 1]\n```", (4, 4, 5), (2, 2, 1)),
        ("**[[A]]**: [3, 3, 3]\n**[[B]]**: [5, 5, 5]", (3, 3, 3), (5, 5, 5)),
        ("[[ A ]] :  [ 1 ,2,  3 ]\n[[B]]:[4,4,4] I hope this helps.", (1, 2, 3), (4, 4, 4)),
        ("[[A]]: 4, 5, 5\n[[B]]: 3, 2, 1", (4, 5, 5), (3, 2, 1)),
        ("[[A]]: [2, 2, 2]\n[[B]]: [2, 2, 2]\nOn reflection:\n[[A]]: [3, 3, 3]\n[[B]]: [1, 1, 1]", (3, 3, 3), (1, 1, 1)),
        ("[[A]]: [4.0, 4.0, 5.0]\n[[B]]: [2.0, 2.0, 1.0]", (4, 4, 5), (2, 2, 1)),
    ],
)
def test_tolerated_forms(output, a, b):
    verdict = parse_verdict(output)
    assert verdict.ok and verdict.a == a and verdict.b == b


@pytest.mark.parametrize(
    "output, reason",
    [
        ("[[A]]: [4, 5, 6]\n[[B]]: [2, 3, 1]", "score 6 is outside 1-5"),
        ("[[A]]: [0, 5, 5]\n[[B]]: [2, 3, 1]", "score 0 is outside 1-5"),
        ("[[A]]: [4, 5]\n[[B]]: [2, 3, 1]", "[[A]] has 2 scores, expected 3"),
        ("[[A]]: [4, 5, 5, 5]\n[[B]]: [2, 3, 1]", "[[A]] has 4 scores, expected 3"),
        ("[[A]]: [4, 5, 5]", "no [[B]] verdict line"),
        ("Both answers are fine.", "no [[A]] verdict line"),
        ("", "empty output"),
    ],
)
def test_rejected_forms_keep_a_reason(output, reason):
    verdict = parse_verdict(output)
    assert not verdict.ok and reason in verdict.reason and verdict.a is None


@pytest.mark.parametrize("task, second", [("completion", "Relevance"), ("qa", "Relevance"), ("summarization", "Completeness")])
def test_templates_carry_the_paper_criteria(task, second):
    text = template_text(task)
    for phrase in ("impartial judge", "1 to 5", "length of the responses", "order in which the responses",
                   "[[A]]: [", "[[B]]: [", "inaccurate or unrelated medical terms", f"2. {second}"):
        assert phrase in text
    chat = messages(task, "Q?", "answer a", "answer b")
    assert chat[0]["role"] == "system" and "answer a" in chat[1]["content"] and "answer b" in chat[1]["content"]
    assert PROMPT_VERSION
