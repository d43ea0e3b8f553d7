"""Paraphrase (MarkLLM's `GPTParaphraser` and `DipperParaphraser` family): the text rewritten by a language model
with MarkLLM's prompt, "Please rewrite the following text: ", at temperature 0.2."""
from __future__ import annotations

from fwsapp.robustness.attacks.llm import LLMRewrite


class Paraphrase(LLMRewrite):
    def instructions(self) -> list[str]:
        return [self.params["prompt"].rstrip()]
