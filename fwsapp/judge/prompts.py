"""The judge's prompt templates, one per task, from the paper's Table 3 criteria and appendix template.

Versioned: a verdict is stored with the version of the template that produced it, and a change of
template means a new version (and new verdicts), never a silent edit.
"""
from __future__ import annotations

PROMPT_VERSION = "fws-judge-v1"

SYSTEM = (
    "Please act as an impartial judge and evaluate the quality of the responses provided by two AI assistants, "
    "LLM A and LLM B, to the {what} displayed below. You are assessing medical text for a general audience."
)

LIKERT = (
    "Rate each response on each criterion with an integer from 1 to 5, where 1 = very poor, 2 = poor, "
    "3 = acceptable, 4 = good, 5 = excellent."
)

CRITERIA = {
    "completion": (
        "1. Coherence: Is the text well structured, logically consistent and easy to follow?\n"
        "2. Relevance: Does the response provide information that is relevant to the prompt it continues?\n"
        "3. Factual Accuracy: Is the medical information correct? Does the response introduce any inaccurate "
        "or unrelated medical terms?"
    ),
    "qa": (
        "1. Coherence: Is the answer well structured, logically consistent and easy to follow?\n"
        "2. Relevance: Does the answer address the question without going off-topic, and does it cover all "
        "essential parts of the question?\n"
        "3. Factual Accuracy: Is the medical information correct? Does the answer introduce any inaccurate "
        "or unrelated medical terms?"
    ),
    "summarization": (
        "1. Coherence: Is the summary well structured, logically consistent and easy to follow?\n"
        "2. Completeness: Does the summary capture the main question without missing any important information?\n"
        "3. Factual Accuracy: Is the summary faithful to the original text? Does it introduce any inaccurate "
        "or unrelated medical terms?"
    ),
}

WHAT = {
    "completion": "text completion prompt",
    "qa": "medical question",
    "summarization": "request to summarize a patient's question",
}

INSTRUCTIONS = (
    "Do not let the length of the responses influence your evaluation. The order in which the responses are "
    "presented must not affect your decision. Be as objective as possible.\n"
    "First give a short justification for each response. Then output your final verdict strictly in this "
    "format, with the three scores in the order of the criteria above:\n"
    "[[A]]: [coherence, second criterion, factual accuracy]\n"
    "[[B]]: [coherence, second criterion, factual accuracy]"
)

USER = (
    "[Prompt]\n{prompt}\n\n"
    "[The Start of LLM A's Response]\n{answer_a}\n[The End of LLM A's Response]\n\n"
    "[The Start of LLM B's Response]\n{answer_b}\n[The End of LLM B's Response]"
)

FORMAT_REMINDER = (
    "Your reply did not end with a verdict in the required format. Reply with only the final verdict, "
    "exactly like this example and with integers from 1 to 5:\n[[A]]: [4, 3, 5]\n[[B]]: [2, 3, 3]"
)


def system_prompt(task_name: str) -> str:
    return "\n\n".join([SYSTEM.format(what=WHAT[task_name]), "Criteria:\n" + CRITERIA[task_name], LIKERT, INSTRUCTIONS])


def messages(task_name: str, prompt: str, answer_a: str, answer_b: str) -> list[dict]:
    return [
        {"role": "system", "content": system_prompt(task_name)},
        {"role": "user", "content": USER.format(prompt=prompt, answer_a=answer_a, answer_b=answer_b)},
    ]


def template_text(task_name: str) -> str:
    """The full template as shown in the UI."""
    return system_prompt(task_name) + "\n\n---\n\n" + USER
