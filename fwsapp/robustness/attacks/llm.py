"""What the LLM attacks share (paraphrase, translate): each text rewritten by a judge backend (OpenAI, any
OpenAI-compatible server, or the local model) in one or more requests, with retries for transient failures. A server
gets the backend's concurrency; the local model rewrites a batch of texts at once, each sampled from its own seed.

With keep_entities, the prompt lists the disease mentions the rewrite must keep verbatim, and the note records how
many it kept. A text the backend could not rewrite (an error after the retries, or an empty reply) is left out, so
the attack stores what it has and a rerun tries the rest.
"""
from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

from fwsapp.robustness.attacks.base import Attack, Attacked, AttackInput

TRIES = 3
LOCAL_BATCH = 16  # texts the local model rewrites together; 6x the throughput of one at a time on a 2-core CPU


class RewriteFailed(RuntimeError):
    """A text the backend did not rewrite; the message says why."""


class LLMRewrite(Attack):
    """Subclasses give `instructions()`: the requests in turn, each rewriting the previous reply."""

    @property
    def backend(self):
        return self.resources["backend"]

    def instructions(self) -> list[str]:
        raise NotImplementedError

    def attack_many(self, inputs: list[AttackInput]) -> list[Attacked | RewriteFailed]:
        terms = [[item.text[span.start:span.end] for span in item.protected] for item in inputs]
        results: list[str | RewriteFailed] = [item.text for item in inputs]
        for instruction in self.instructions():
            pending = [i for i, result in enumerate(results) if isinstance(result, str)]
            requests = [(self._messages(instruction, results[i], terms[i]), self._seed(inputs[i])) for i in pending]
            for i, reply in zip(pending, self._ask_all(requests)):
                results[i] = reply
        return [result if isinstance(result, RewriteFailed) else Attacked(" ".join(result.split()), note=kept(result, own))
                for result, own in zip(results, terms)]

    def _seed(self, item: AttackInput) -> int:
        return self.seed * 1_000_003 + item.sample_idx

    @staticmethod
    def _messages(instruction: str, text: str, terms: list[str]) -> list[dict]:
        keep = (" Keep these terms exactly as they are written: " + "; ".join(terms) + ".") if terms else ""
        return [{"role": "user", "content": f"{instruction}{keep}\n\n{text}"}]

    def _ask_all(self, requests: list[tuple[list[dict], int]]) -> list[str | RewriteFailed]:
        if hasattr(self.backend, "rewrite_many"):  # a model in this process: batches, longest prompts together
            order = sorted(range(len(requests)), key=lambda i: len(requests[i][0][0]["content"]))
            replies: list[str | RewriteFailed] = [""] * len(requests)
            for start in range(0, len(order), LOCAL_BATCH):
                batch = order[start:start + LOCAL_BATCH]
                completions = self.backend.rewrite_many([requests[i][0] for i in batch], self.params["temperature"],
                                                        self.params["max_tokens"], [requests[i][1] for i in batch])
                for i, completion in zip(batch, completions):
                    replies[i] = completion.text.strip() or RewriteFailed("an empty reply")
            return replies
        from fwsapp.judge.backends import requests_abandoned_on_interrupt

        workers = self.backend.concurrency_limit or self.resources.get("concurrency", 1)
        with ThreadPoolExecutor(max_workers=max(1, workers)) as pool, requests_abandoned_on_interrupt(self.backend):
            return list(pool.map(lambda request: self._ask(*request), requests))

    def _ask(self, messages: list[dict], seed: int) -> str | RewriteFailed:
        """One request to a server, retried when the failure is transient."""
        from fwsapp.judge.backends import JudgeError, TransientError

        reason = ""
        for attempt in range(TRIES):
            try:
                reply = self.backend.rewrite(messages, self.params["temperature"], self.params["max_tokens"], seed=seed)
            except TransientError as error:
                reason = str(error)
                time.sleep(error.retry_after if error.retry_after is not None else 0.5 * 2 ** attempt)
                continue
            except JudgeError as error:
                return RewriteFailed(str(error))
            if reply.text.strip():
                return reply.text.strip()
            reason = "an empty reply"
        return RewriteFailed(reason)


def kept(text: str, terms: list[str]) -> str:
    """The note on a rewrite told to keep `terms`: how many it kept verbatim."""
    return f"kept {sum(term in text for term in terms)} of {len(terms)} terms verbatim" if terms else ""
