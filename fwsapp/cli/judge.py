"""`judge`: the pairwise LLM judge."""
from __future__ import annotations

import math
import os
import sys
import threading

from fwsapp.cli.options import command, refuse_unused_loading, target_options
from fwsapp.cli.terminal import opened_targets, INTERRUPTED, first_interrupt_stops, model_loader, progress_bar


def register(commands) -> None:
    from fwsapp.judge.registry import CONCURRENT_REQUESTS, JUDGE_BACKENDS, REQUEST_TIMEOUT_SECONDS

    judge = command(commands, cmd_judge, "judge", models=True,
        help="judge unwatermarked vs watermarked outputs pairwise with an LLM")
    target_options(judge)
    judge.add_argument("--backend", required=True, choices=JUDGE_BACKENDS.names(),
                       help="; ".join(f"{entry.name}: {entry.help}" for entry in JUDGE_BACKENDS))
    judge.add_argument("--base-url", help="an OpenAI-compatible server, e.g. http://localhost:8000/v1 (vLLM)")
    judge.add_argument("--judge-model", help="default gpt-4o-2024-08-06 (openai) or the embedded model (local)")
    judge.add_argument("--api-key-env", metavar="VAR",
                       help="the environment variable whose value is sent as the API key (default: OPENAI_API_KEY "
                            "for openai; no key for a compatible server)")
    judge.add_argument("--concurrency", type=int, default=CONCURRENT_REQUESTS,
                       help="requests in flight at once (default %(default)s)")
    judge.add_argument("--swap", action="store_true", help="judge both A/B orders and average them")
    judge.add_argument("--budget", type=float, help="stop cleanly once the estimated spend reaches this many US$")
    judge.add_argument("--timeout", type=float, default=REQUEST_TIMEOUT_SECONDS, help="seconds per request")
    judge.add_argument("--retry-failed", action="store_true",
                       help="ask again for pairs whose verdict could not be parsed (unreachable pairs always are)")
    judge.add_argument("--max-attempts", type=int, default=6, help="tries per request before a pair is unreachable")


def cmd_judge(args) -> int:
    from fwsapp.orchestration import pipeline
    from fwsapp.judge.backends import local_duration
    from fwsapp.judge.registry import JUDGE_BACKENDS
    from fwsapp.judge.runner import JudgeSettings, estimate, plan_pairs, unkept_budget

    refuse_unused_loading(args, JUDGE_BACKENDS[args.backend].in_process,
                          f"The {args.backend} judge's model answers from its server")
    for option, value in (("--max-attempts", args.max_attempts), ("--concurrency", args.concurrency)):
        if value < 1:
            raise ValueError(f"{option} must be at least 1, not {value}.")
    if not 0 < args.timeout < math.inf:  # written so that nan is refused too
        raise ValueError(f"--timeout must be a number of seconds above 0, not {args.timeout:g}.")
    if args.budget is not None and not 0 <= args.budget < math.inf:
        raise ValueError(f"--budget must be a number of US$ from 0, not {args.budget:g}.")
    if unkept := unkept_budget(args.judge_model or JUDGE_BACKENDS[args.backend].default_model, args.budget):
        raise ValueError(unkept)  # before a local judge's model is loaded
    store, targets = opened_targets(args)
    api_key = None
    if args.api_key_env:
        api_key = os.environ.get(args.api_key_env)
        if not api_key:
            raise ValueError(f"--api-key-env {args.api_key_env}: that environment variable is not set.")
    settings = JudgeSettings(concurrency=args.concurrency, swap=args.swap, budget_usd=args.budget,
                             retry_failed=args.retry_failed, max_attempts=args.max_attempts)
    loader = model_loader(args)
    backend = pipeline.judge_backend(loader, args.backend, args.judge_model, args.base_url, args.timeout, api_key)
    judge_model = backend.model
    plan = plan_pairs(store, targets, judge_model, settings)
    usage, cost = estimate(plan.pairs, judge_model, args.backend)
    print(f"{plan.described()}, with {judge_model}: about "
          f"{usage.prompt_tokens:,} prompt and {usage.completion_tokens:,} completion tokens"
          + (f", no cost, about {local_duration(len(plan.pairs), usage.prompt_tokens)} here" if JUDGE_BACKENDS[args.backend].in_process
             else f", about ${cost:.2f}" if cost is not None else ", cost unknown for this model"), file=sys.stderr)
    stop = threading.Event()
    with progress_bar(f"judge {judge_model}", "pair") as progress, first_interrupt_stops(
            stop, "no new requests; the answers of those in flight are stored as they arrive"):
        outcome = pipeline.judge(store, targets, loader, progress, stop, backend=backend, settings=settings)
    print(outcome.describe(judge_model))
    if outcome.stopped == "cancelled":
        return INTERRUPTED
    if outcome.problem():
        print(f"error: {outcome.problem()}", file=sys.stderr)
        return 1
    return 0
