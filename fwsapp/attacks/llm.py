"""What the LLM attacks share (paraphrase, translate): each text rewritten by a judge backend (OpenAI, any
OpenAI-compatible server, or the local model), with retries for transient failures and the backend's concurrency.

With keep_entities, the prompt lists the disease mentions the rewrite must keep verbatim, and the note records how
many it kept. A text the backend could not rewrite (an error after the retries, or an empty reply) is left out, so
the attack stores what it has and a rerun tries the rest.
"""
from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

from fwsapp.attacks.base import Attack, Attacked, AttackInput

TRIES = 3


class RewriteFailed(RuntimeError):
    """A text the backend did not rewrite; the message says why."""


class LLMRewrite(Attack):
    """Subclasses give the chain of requests: `rewrite(text, item)` calls `ask` once or more."""

    @property
    def backend(self):
        return self.resources["backend"]

    def attack_many(self, inputs: list[AttackInput]) -> list[Attacked | RewriteFailed]:
        workers = self.backend.concurrency_limit or self.resources.get("concurrency", 1)
        with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
            return list(pool.map(self._one, inputs))

    def _one(self, item: AttackInput) -> Attacked | RewriteFailed:
        terms = [item.text[span.start:span.end] for span in item.protected]
        try:
            text = self.rewrite(item.text, terms, item.sample_idx)
        except RewriteFailed as failure:
            return failure
        kept = f"kept {sum(term in text for term in terms)} of {len(terms)} terms verbatim" if terms else ""
        return Attacked(" ".join(text.split()), note=kept)

    def ask(self, instruction: str, text: str, terms: list[str], sample_idx: int) -> str:
        """One request: the instruction, the terms to keep, then the text; retried when the failure is transient."""
        from fwsapp.judge.backends import JudgeError, TransientError

        keep = (" Keep these terms exactly as they are written: " + "; ".join(terms) + ".") if terms else ""
        messages = [{"role": "user", "content": f"{instruction}{keep}\n\n{text}"}]
        reason = ""
        for attempt in range(TRIES):
            try:
                reply = self.backend.rewrite(messages, self.params["temperature"], self.params["max_tokens"],
                                             seed=self.seed * 1_000_003 + sample_idx)
            except TransientError as error:
                reason = str(error)
                time.sleep(error.retry_after if error.retry_after is not None else 0.5 * 2 ** attempt)
                continue
            except JudgeError as error:
                raise RewriteFailed(str(error)) from None
            if reply.text.strip():
                return reply.text.strip()
            reason = "an empty reply"
        raise RewriteFailed(reason)

    def rewrite(self, text: str, terms: list[str], sample_idx: int) -> str:
        raise NotImplementedError
