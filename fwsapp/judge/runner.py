"""The judge runner: concurrent pairwise judging that survives API faults and is never paid for twice.

- Requests run in a thread pool (8 by default). 429, 5xx, timeouts and cut-off responses back off
  exponentially with jitter, honouring Retry-After, up to `max_attempts`.
- An unparsable verdict is asked again once, with a reminder of the format; then it is recorded as
  failed with its reason and the raw output. A score is never guessed.
- A pair whose requests never got through (connection, timeouts, 5xx after every retry, a refused
  request) is recorded as unreachable with its reason, and a re-run asks for it again: only a verdict
  that was received and could not be parsed is a final failure.
- Once UNREACHABLE_IN_A_ROW pairs in a row have ended unreachable, no new pair is sent: the judge is down or its
  address is wrong, and the run says so at once instead of after every pair's retries.
- Every verdict is written as it arrives, keyed by (run, sample, texts hash, judge model, prompt
  version, order); a re-run skips the keys already stored, so only missing pairs are requested.
- A budget cap stops submitting new requests once the spend reaches it; requests in flight finish and
  are recorded. So does a stop (Cancel in the app, Ctrl-C on the command line): no new request is sent, not
  even a retry or a format reminder, and every answer that arrives is stored, since it is paid for.
"""
from __future__ import annotations

import hashlib
import threading
import time
from collections import Counter
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Callable

from fwsapp import counted
from fwsapp.judge import prompts
from fwsapp.judge.backends import PRICES, Completion, JudgeError, price, requests_abandoned_on_interrupt
from fwsapp.models.server import with_retries
from fwsapp.models.tokenizers import CHARS_PER_TOKEN
from fwsapp.judge.registry import CONCURRENT_REQUESTS, JUDGE_BACKENDS
from fwsapp.judge.parser import VERDICT_SCHEMA, parse_verdict
from fwsapp.judge.records import texts_hash
from fwsapp.store import Store

UNREACHABLE = "unreachable"  # the request never got a verdict back; retried on the next run


# Pairs in a row whose requests never got through, each after all its retries, before no new pair is sent: the judge
# is down or its address is wrong, and every further pair would wait out its own retries (half a minute at the
# defaults) for nothing; 200 pairs at a refused address took 10 minutes to say so.
UNREACHABLE_IN_A_ROW = 8


@dataclass
class JudgeSettings:
    concurrency: int = CONCURRENT_REQUESTS
    swap: bool = False
    order_seed: int = 0
    max_attempts: int = 6
    backoff_base: float = 1.0
    backoff_cap: float = 60.0
    budget_usd: float | None = None
    retry_failed: bool = False


@dataclass(frozen=True)
class Pair:
    run_id: str
    sample_idx: int
    task: str
    prompt: str
    watermarked: str
    unwatermarked: str
    watermarked_first: bool

    @property
    def key(self) -> tuple:
        return (self.run_id, self.sample_idx, self.watermarked_first, texts_hash(self.watermarked, self.unwatermarked))

    def messages(self) -> list[dict]:
        a, b = (self.watermarked, self.unwatermarked) if self.watermarked_first else (self.unwatermarked, self.watermarked)
        return prompts.messages(self.task, self.prompt, a, b)


@dataclass
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def cost(self, model: str) -> float | None:
        rates = price(model)
        if rates is None:
            return None
        return (self.prompt_tokens * rates[0] + self.completion_tokens * rates[1]) / 1_000_000


@dataclass
class Outcome:
    requested: int = 0
    judged: int = 0
    failed: int = 0
    unreachable: int = 0
    skipped: int = 0
    without_text: int = 0  # samples with an empty answer: no pair to judge
    reasons: Counter = field(default_factory=Counter)  # why pairs were unreachable, grouped
    stopped: str | None = None  # "budget", "cancelled" or "unreachable" when the run ended early
    usage: Usage = field(default_factory=Usage)
    seconds: float = 0.0

    def describe(self, model: str) -> str:
        cost = self.usage.cost(model)
        spent = f", ${cost:.4f}" if cost is not None else ""
        ending = {"budget": " Stopped at the budget cap; run again to continue.",
                  "cancelled": " Cancelled; run again to continue.",
                  "unreachable": f" Stopped after {UNREACHABLE_IN_A_ROW} pairs in a row could not reach the judge: "
                                 f"{self.not_sent} not sent; check the server, then run again to continue.",
                  }.get(self.stopped, "")
        unreachable = ""
        if self.unreachable:
            grouped = "; ".join(f"{count} × {reason}" for reason, count in self.reasons.most_common())
            unreachable = (f" {self.unreachable} unreachable ({grouped}); they are asked again on the next run.")
        empty = f", {self.without_text} not judged (an empty answer)" if self.without_text else ""
        return (f"Judged {self.judged}, failed {self.failed} (unparsable verdicts), skipped {self.skipped} already "
                f"judged{empty}, in {self.seconds:.1f} s; {self.usage.prompt_tokens:,} prompt + "
                f"{self.usage.completion_tokens:,} completion tokens{spent}.{ending}{unreachable}")

    @property
    def not_sent(self) -> int:
        return self.requested - self.judged - self.failed - self.unreachable

    def problem(self) -> str | None:
        """Why a run failed, in one message the CLI (exit 1) and the app's job (failed) both show: no verdict at all,
        or the judge lost mid-run (some verdicts stored, the rest not sent: a script that went on to the report would
        report a part as the whole). None when the run finished with some verdict, nothing was asked, or its budget
        or its user stopped it."""
        if not self.requested or self.stopped in ("budget", "cancelled") or (self.judged and not self.stopped):
            return None
        reasons = "; ".join(f"{count} × {reason}" for reason, count in self.reasons.most_common())
        if self.judged:  # stopped unreachable after some verdicts
            return (f"the judge stopped answering after {counted(self.judged, 'verdict', 'verdicts')}: "
                    f"{UNREACHABLE_IN_A_ROW} pairs in a row could not reach it ({reasons}), so {self.not_sent} of the "
                    f"{self.requested} pairs were not sent. The verdicts read are stored; check the server, then run "
                    "again to judge the rest.")
        if self.unreachable and not self.failed:  # every pair sent failed in transport
            which = (f"any of the {self.requested} pairs" if not self.not_sent else
                     f"the first {self.unreachable} of the {self.requested} pairs, so the other {self.not_sent} were not sent")
            return (f"the judge could not be reached for {which} ({reasons}). Check the base URL, the server and the "
                    "key; the next run asks for these pairs again.")
        return (f"no verdict of the {self.requested} pairs could be read ({self.failed} unparsable, {self.unreachable} "
                "unreachable): the judge model does not write the verdict format. Use a stronger judge, or a server "
                "that honours structured output; --retry-failed asks for the unparsable ones again.")


def reason_group(reason: str) -> str:
    """A transport failure's kind, for counting: 'gave up after 6 attempts; last: 500 server error: …'
    groups as '500 server error'."""
    last = reason.split("last: ", 1)[-1]
    return last.split(":", 1)[0].strip()


def watermarked_first(order_seed: int, run_id: str, sample_idx: int) -> bool:
    """The stored random A/B order of a sample: a pure function of the seed, so a re-run agrees."""
    digest = hashlib.sha256(f"{order_seed}:{run_id}:{sample_idx}".encode()).digest()
    return digest[0] % 2 == 0


@dataclass
class PairPlan:
    """The pairs still to judge, how many are judged already, and how many samples have no pair to judge (an empty
    watermarked or unwatermarked answer; the paper's logs have some), each said beside the count."""
    pairs: list[Pair]
    already_judged: int
    without_text: int

    def described(self) -> str:
        """'196 pairs to judge (0 already judged; 4 samples with an empty answer are not judged)'."""
        empty = (f"; {counted(self.without_text, 'sample with an empty answer is', 'samples with an empty answer are')}"
                 " not judged" if self.without_text else "")
        return f"{counted(len(self.pairs), 'pair', 'pairs')} to judge ({self.already_judged} already judged{empty})"


def plan_pairs(store: Store, run_ids: list[str], judge_model: str, settings: JudgeSettings) -> PairPlan:
    """The pairs still to judge, how many are stored already, and how many samples have an empty answer."""
    existing = store.judgments(run_ids)
    existing = existing[(existing.judge_model == judge_model) & (existing.prompt_version == prompts.PROMPT_VERSION)]
    existing = existing[existing.status != UNREACHABLE]  # transport failures are always asked again
    if settings.retry_failed:
        existing = existing[existing.status == "ok"]
    done = {
        (row.run_id, row.sample_idx, bool(row.watermarked_first), row.texts_hash) for row in existing.itertuples()
    }
    pairs, skipped, without_text = [], 0, 0
    for run_id in run_ids:
        task = store.run(run_id)["task"]
        for row in store.generations(run_id).itertuples():
            if not row.watermarked_text or not row.unwatermarked_text:
                without_text += 1
                continue
            orders = (True, False) if settings.swap else (watermarked_first(settings.order_seed, run_id, row.sample_idx),)
            for order in orders:
                pair = Pair(run_id, int(row.sample_idx), task, row.prompt, row.watermarked_text, row.unwatermarked_text, order)
                if pair.key in done:
                    skipped += 1
                else:
                    pairs.append(pair)
    return PairPlan(pairs, skipped, without_text)


def estimate(pairs: list[Pair], judge_model: str, backend: str) -> tuple[Usage, float | None]:
    """Expected tokens and cost before a run, from the prompt lengths and what a verdict of `backend` takes."""
    characters = sum(len(message["content"]) for pair in pairs for message in pair.messages())
    usage = Usage(characters // CHARS_PER_TOKEN, JUDGE_BACKENDS[backend].completion_tokens * len(pairs))
    return usage, usage.cost(judge_model)


def _call_with_retries(backend, messages: list[dict], settings: JudgeSettings, stop: threading.Event) -> Completion:
    return with_retries(lambda: backend.complete(messages, VERDICT_SCHEMA), settings.max_attempts, stop,
                        settings.backoff_base, settings.backoff_cap, JudgeError, "judge")


def judge_pair(pair: Pair, backend, settings: JudgeSettings, stop: threading.Event) -> tuple[dict, Usage]:
    """Judge one ordered pair; always returns a row, judged or failed with its reason."""
    started = time.perf_counter()
    usage = Usage()
    outputs: list[str] = []
    row = {
        "sample_idx": pair.sample_idx, "judge_model": backend.model, "prompt_version": prompts.PROMPT_VERSION,
        "watermarked_first": pair.watermarked_first, "texts_hash": pair.key[3], "backend": backend.name,
        "status": "failed", "reason": None, "scores_watermarked": None, "scores_unwatermarked": None,
    }
    messages = pair.messages()
    try:
        for attempt in range(2):  # the verdict, then once more with a format reminder
            completion = _call_with_retries(backend, messages, settings, stop)
            usage.prompt_tokens += completion.prompt_tokens or 0
            usage.completion_tokens += completion.completion_tokens or 0
            outputs.append(completion.text)
            # Which way the verdict came: constrained to the JSON schema by the server, or free text parsed.
            row["backend"] = f"{backend.name}:{'json_schema' if completion.structured else 'text'}"
            verdict = parse_verdict(completion.text)
            if verdict.ok:
                first, second = list(verdict.a), list(verdict.b)
                scores_w, scores_u = (first, second) if pair.watermarked_first else (second, first)
                row.update(status="ok", reason=None, scores_watermarked=scores_w, scores_unwatermarked=scores_u)
                break
            row["reason"] = f"unparsable verdict ({verdict.reason})" + (" after a format reminder" if attempt else "")
            if stop.is_set():  # stopping sends nothing new, not even the reminder
                row["reason"] += "; stopped before the format reminder"
                break
            messages = messages + [
                {"role": "assistant", "content": completion.text},
                {"role": "user", "content": prompts.FORMAT_REMINDER},
            ]
    except JudgeError as error:
        row.update(status=UNREACHABLE, reason=str(error))
    row.update(
        raw_output="\n\n--- retry with format reminder ---\n\n".join(outputs) if outputs else None,
        prompt_tokens=usage.prompt_tokens, completion_tokens=usage.completion_tokens,
        seconds=time.perf_counter() - started, created=datetime.now(timezone.utc).replace(tzinfo=None),
    )
    return row, usage


def budget_counted(judge_model: str) -> bool:
    """Whether a budget cap can be kept with this judge model: the spend is counted from its price per token, and a
    model with none known here (a local or self-served model, an OpenAI model not in PRICES) never reaches a cap."""
    return price(judge_model) is not None


def unkept_budget(judge_model: str, budget_usd: float | None) -> str | None:
    """Why a budget cap cannot be kept with this judge model (`budget_counted`), or None: every pair was asked for
    under a cap that was no cap."""
    if budget_usd is None or budget_counted(judge_model):
        return None
    return (f"A budget of ${budget_usd:g} cannot be kept with {judge_model}: no price is known for it (only for "
            f"{', '.join(PRICES)}), so its spend is not counted. Drop the budget, or judge with one of those.")


def run_judge(
    store: Store,
    run_ids: list[str],
    backend,
    settings: JudgeSettings | None = None,
    progress: Callable[[int, int], None] | None = None,
    cancel: threading.Event | None = None,
) -> Outcome:
    """Judge every missing pair of the runs; verdicts are written as they arrive."""
    settings = settings or JudgeSettings()
    if unkept := unkept_budget(backend.model, settings.budget_usd):
        raise ValueError(unkept)
    plan = plan_pairs(store, run_ids, backend.model, settings)
    pairs = plan.pairs
    outcome = Outcome(requested=len(pairs), skipped=plan.already_judged, without_text=plan.without_text)
    stop = cancel or threading.Event()
    workers = max(1, min(settings.concurrency, backend.concurrency_limit or settings.concurrency))
    started = time.perf_counter()
    pending_pairs = iter(pairs)
    if progress:
        progress(0, len(pairs))
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="fwsapp-judge") as pool:
        in_flight = {}

        def submit_next() -> bool:
            pair = next(pending_pairs, None)
            if pair is None:
                return False
            in_flight[pool.submit(judge_pair, pair, backend, settings, stop)] = pair
            return True

        for _ in range(workers):
            if not submit_next():
                break
        with requests_abandoned_on_interrupt(backend):
            _collect(in_flight, submit_next, store, outcome, workers, len(pairs), backend, settings, progress, cancel)
    outcome.seconds = time.perf_counter() - started
    return outcome


def _collect(in_flight: dict, submit_next, store: Store, outcome: Outcome, workers: int, total: int, backend,
             settings: JudgeSettings, progress, cancel) -> None:
    """Store each verdict as it arrives and send the next request, until none is in flight."""
    finished = unreachable_in_a_row = 0
    while in_flight:
        done, _ = wait(in_flight, return_when=FIRST_COMPLETED)
        for future in done:
            pair = in_flight.pop(future)
            row, usage = future.result()
            store.write_rows("judgments", pair.run_id, [row])
            outcome.usage.prompt_tokens += usage.prompt_tokens
            outcome.usage.completion_tokens += usage.completion_tokens
            outcome.judged += row["status"] == "ok"
            outcome.failed += row["status"] == "failed"
            if row["status"] == UNREACHABLE:
                outcome.unreachable += 1
                outcome.reasons[reason_group(row["reason"])] += 1
            unreachable_in_a_row = unreachable_in_a_row + 1 if row["status"] == UNREACHABLE else 0
            finished += 1
            if progress:
                progress(finished, total)
        spent = outcome.usage.cost(backend.model)
        if settings.budget_usd is not None and spent is not None and spent >= settings.budget_usd:
            outcome.stopped = "budget"
        elif cancel is not None and cancel.is_set():
            outcome.stopped = "cancelled"
        elif unreachable_in_a_row >= UNREACHABLE_IN_A_ROW:
            outcome.stopped = "unreachable"
        if outcome.stopped is None:
            while len(in_flight) < workers and submit_next():
                pass
