"""One toy plug-in per axis, as small as one can be: each is a class and one registry entry, and nothing else names it.

tests/test_plugins.py registers each for one test and follows it into the CLI, doctor, the grid, the pages and the
generic checks. With FWSAPP_TOY_PLUGINS=1, conftest.py registers all five for the whole session, so every generic test
parametrised from a registry gets a case for each (test_plugins checks the collected cases).
"""
from contextlib import ExitStack, contextmanager

from fwsapp.entities.recognizers import RECOGNIZERS, RecognizerPlugIn
from fwsapp.entities.recognizers.base import Entity, Recognizer
from fwsapp.judge.registry import JUDGE_BACKENDS, JudgeBackendPlugIn
from fwsapp.quality.base import ReferenceMetric
from fwsapp.quality.registry import METRICS, Column, MetricPlugIn
from fwsapp.robustness.attacks import ATTACKS, AttackPlugIn
from fwsapp.robustness.attacks.base import Attack, Attacked
from fwsapp.watermark import methods
from fwsapp.watermark.kgw import KGW


TOY_METHOD = methods.MethodInfo(
    "QuarterGreen", "KGW with a quarter of the vocabulary green (a test's plug-in)",
    params={**methods.KGW.params, "gamma": (0.25, methods.GAMMA)}, threshold_param="z_threshold",
    implementation=f"{__name__}:QuarterGreen", test_params={"rng": "cpu"}, keyed_draw=methods.MARKLLM_GREEN_LIST,
    seeding_context=methods.tokens_before("prefix_length"))


class QuarterGreen(KGW, info=TOY_METHOD):
    """KGW under another entry: a method as small as one can be."""


class ToyRecognizer(Recognizer):
    """Every capitalised word is a disease: a plug-in as small as one can be."""

    def candidates(self, texts):
        import re

        return [[Entity(match[0], match.start(), match.end()) for match in re.finditer(r"\b[A-Z][a-z]+\b", text)]
                for text in texts]


TOY_RECOGNIZER = RecognizerPlugIn("capitals", "capitalised words (a test's plug-in)", f"{__name__}:ToyRecognizer",
                                  label=lambda: "toy recognizer v1")


class ToyBackend:
    """Answers every pair with the same verdict, in the paper's format."""

    name, model, concurrency_limit = "toy", "toy-judge", 1

    @classmethod
    def from_settings(cls, judge_model, base_url, timeout, api_key, loaded=None):
        return cls()

    def complete(self, messages, schema=None):
        from fwsapp.judge.backends import Completion
        from tests.openai_stub import VALID_VERDICT

        return Completion(VALID_VERDICT)

    def check(self) -> str:
        return "toy judge ready"


TOY_BACKEND = JudgeBackendPlugIn("toy", "the same verdict every time (a test's plug-in)", f"{__name__}:ToyBackend",
                                 menu_label="Toy judge", default_model="toy-judge")


class WordCountRatio(ReferenceMetric):
    """Words in the output over words in the reference: a plug-in as small as one can be."""

    def config(self, run, resources) -> str:
        return "words"

    def values(self, outputs, references, resources) -> list[float]:
        return [len(output.split()) / max(len(reference.split()), 1) for output, reference in zip(outputs, references)]


TOY_METRIC = MetricPlugIn("length_ratio", "words in the output over words in the reference (a test's plug-in)",
                          f"{__name__}:WordCountRatio", label="Length ratio", seconds_per_1000_characters=0.001,
                          columns=(Column("length_ratio", "Length ratio", lower_is_better=True, aspects=("relevance",)),))


class Shout(Attack):
    """Every word in capitals: an attack as small as one can be."""

    def attack(self, item, rng) -> Attacked:
        return Attacked(item.text.upper())


TOY_ATTACK = AttackPlugIn("shout", "every word in capitals (a test's plug-in)", f"{__name__}:Shout", edits="characters")


TOYS = {"methods": (methods.METHODS, TOY_METHOD), "recognizers": (RECOGNIZERS, TOY_RECOGNIZER),
        "judge backends": (JUDGE_BACKENDS, TOY_BACKEND), "metrics": (METRICS, TOY_METRIC), "attacks": (ATTACKS, TOY_ATTACK)}


@contextmanager
def all_registered():
    """Every toy in its registry for the length of the block."""
    with ExitStack() as stack:
        for registry, entry in TOYS.values():
            stack.enter_context(registry.registered(entry))
        yield
