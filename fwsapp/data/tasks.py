"""The paper's three medical tasks and the rules (its appendix) that turn raw datasets into prompts."""
from __future__ import annotations

import re

from dataclasses import dataclass

SUMMARIZATION_TEMPLATE = "Write a short question that summarizes this question: {text} Summarized Question:"


@dataclass(frozen=True)
class Sample:
    prompt: str
    reference: str


@dataclass(frozen=True)
class Task:
    name: str
    label: str
    dataset: str


TASKS = {
    "completion": Task("completion", "Text completion", "HealthQA"),
    "qa": Task("qa", "Question answering", "HealthQA"),
    "summarization": Task("summarization", "Summarization", "MeQSum"),
}

COMPLETION_PROMPT_WORDS = 30
COMPLETION_REFERENCE_WORDS = 200
QA_QUESTION_WORDS = 10
QA_MAX_ANSWER_WORDS = 250
SUMMARIZATION_MAX_INPUT_WORDS = 60
SUMMARIZATION_MIN_SUMMARY_WORDS = 10


def task_labels() -> list[str]:
    """The tasks' labels in the tasks' order: the order of every table's and chart's tasks."""
    return [task.label for task in TASKS.values()]


def task_label(name: str) -> str:
    """A task as tables and charts name it ("Question answering"); a name fwsapp does not know, as it was stored."""
    return TASKS[name].label if name in TASKS else name


def tasks_named(frame):
    """`frame` (a table) with its `task` column as people read it, for a table a page shows or a command prints; the
    tables themselves keep the stored names."""
    return frame.assign(task=frame.task.map(task_label)) if "task" in frame.columns else frame


def task(name: str) -> Task:
    try:
        return TASKS[name]
    except KeyError:
        raise ValueError(f"Unknown task '{name}'. Choose one of: {', '.join(TASKS)}.") from None


# The rules below in words, for a raw table none of whose rows passes them.
RAW_RULES = {
    "completion": f"an answer of more than {COMPLETION_PROMPT_WORDS + COMPLETION_REFERENCE_WORDS} words (of its last "
                  f"{COMPLETION_PROMPT_WORDS + COMPLETION_REFERENCE_WORDS}, the first {COMPLETION_PROMPT_WORDS} are the "
                  f"prompt and the rest the reference)",
    "qa": f"a question of exactly {QA_QUESTION_WORDS} words ending in '?' and an answer under {QA_MAX_ANSWER_WORDS} "
          "words",
    "summarization": f"a question of at most {SUMMARIZATION_MAX_INPUT_WORDS} words and a summary of at least "
                     f"{SUMMARIZATION_MIN_SUMMARY_WORDS} words",
}


def completion_sample(answer: str) -> Sample | None:
    """HealthQA answers over 230 words: of the last 230, the first 30 prompt and the next 200 are the reference."""
    words = answer.split()
    window = COMPLETION_PROMPT_WORDS + COMPLETION_REFERENCE_WORDS
    if len(words) <= window:
        return None
    tail = words[-window:]
    return Sample(" ".join(tail[:COMPLETION_PROMPT_WORDS]), " ".join(tail[COMPLETION_PROMPT_WORDS:]))


def qa_sample(question: str, answer: str) -> Sample | None:
    """HealthQA questions of exactly 10 words ending in '?', with answers under 250 words."""
    question = question.strip()
    if len(question.split()) != QA_QUESTION_WORDS or not question.endswith("?"):
        return None
    if len(answer.split()) >= QA_MAX_ANSWER_WORDS:
        return None
    return Sample(question, answer.strip())


def summarization_sample(text: str, summary: str) -> Sample | None:
    """MeQSum inputs of at most 60 words whose summaries have at least 10 words."""
    if len(text.split()) > SUMMARIZATION_MAX_INPUT_WORDS:
        return None
    if len(summary.split()) < SUMMARIZATION_MIN_SUMMARY_WORDS:
        return None
    return Sample(SUMMARIZATION_TEMPLATE.format(text=text.strip()), summary.strip())


# How the paper's log files name the tasks (KGW-g0.5-d2-meditron-HQA2.generations.json is QA).
PAPER_FILE_CODES = {"HQA": "completion", "HQA2": "qa", "MEQS": "summarization"}


def task_from_file_name(name: str) -> str | None:
    """The task a paper-style log file name declares, if it declares one."""
    codes = {part.upper() for part in re.split(r"[-_.\s]+", name)}
    found = {task for code, task in PAPER_FILE_CODES.items() if code in codes}
    return found.pop() if len(found) == 1 else None


def strip_prompt(text: str, prompt: str) -> str:
    """The generated part of an output that begins with its prompt (MarkLLM logs keep it), before any metric.

    As the paper scored it: the text's words after as many words as the prompt has, joined by single
    spaces. The decoder's clean-up may have changed the prompt's spacing ("age ." became "age."), so an
    output begins with its prompt when their letters and digits do.
    """
    if prompt and _letters(text).startswith(_letters(prompt)):
        return " ".join(text.split()[len(prompt.split()):])
    return text


def _letters(text: str) -> str:
    return re.sub(r"\W+", "", text)
