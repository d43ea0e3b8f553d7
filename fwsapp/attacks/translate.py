"""Round-trip translation: the text translated into another language and back into English by a language model, each
way one request (the translation attack of MarkMyWords and WaterPark)."""
from __future__ import annotations

from fwsapp.attacks.llm import LLMRewrite

INSTRUCTION = "Translate the following text into {language}. Reply with the translation only."


class Translate(LLMRewrite):
    def rewrite(self, text, terms, sample_idx) -> str:
        there = self.ask(INSTRUCTION.format(language=self.params["language"]), text, terms, sample_idx)
        return self.ask(INSTRUCTION.format(language="English"), there, terms, sample_idx)
