"""Round-trip translation: the text translated into another language and back into English by a language model,
each way one request (the translation attack of MarkMyWords and WaterPark)."""
from __future__ import annotations

from fwsapp.robustness.attacks.llm import LLMRewrite

INSTRUCTION = "Translate the following text into {language}. Reply with the translation only."


class Translate(LLMRewrite):
    def instructions(self) -> list[str]:
        return [INSTRUCTION.format(language=language) for language in (self.params["language"], "English")]
