"""Clinical facts against the reference (`fwsapp.entities.changes`, by concept): per text, the drugs and doses the
reference does not state, the facts whose assertion it contradicts, and the corrupted medical terms per 1,000 words.
Lower is better for each; the watermarked and unwatermarked texts' values side by side say what the watermark adds."""
from __future__ import annotations

from fwsapp.quality.base import ReferenceMetric

# Stored column -> (change kind, only facts the reference lacks)
COUNTED = {
    "unsupported_drugs": ("drug", True),
    "unsupported_doses": ("dose", True),
    "negation_flips": ("negation", False),
    "corrupted_terms": ("corruption", False),  # per 1,000 words
}
PER_THOUSAND_WORDS = "corrupted_terms"


class ClinicalFacts(ReferenceMetric):
    def finder(self, resources):
        from fwsapp.entities.facts import FactFinder

        return FactFinder({"disease": resources.recognizer_name})

    def config(self, run: dict, resources) -> str:
        return self.finder(resources).config

    def values(self, outputs: list[str], references: list[str], resources) -> dict[str, list[float]]:
        from fwsapp.entities.changes import BY_CONCEPT, changes, counted, word_count

        found = self.finder(resources).find_many(outputs + references)
        values: dict[str, list[float]] = {name: [] for name in COUNTED}
        for index, (output, reference) in enumerate(zip(outputs, references)):
            changed = changes(output, found[index], reference, found[len(outputs) + index], by=BY_CONCEPT)
            for name, (kind, unsupported_only) in COUNTED.items():
                count = counted(changed, kind, unsupported_only)
                if name == PER_THOUSAND_WORDS:
                    words = word_count(output)
                    values[name].append(1000 * count / words if words else 0.0)
                else:
                    values[name].append(float(count))
        return values
