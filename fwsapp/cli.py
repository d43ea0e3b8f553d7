"""Command line: `python -m fwsapp generate|runs|export|detect|score|judge|analyze|import|report`."""
from __future__ import annotations

import argparse
import json
import os
import sys
from contextlib import contextmanager
from pathlib import Path

from fwsapp.paths import DEFAULT_DB


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.handler(args)
    except (ValueError, RuntimeError, OSError) as error:
        # Every expected failure (bad file, locked DB, unknown model) is one clear line, not a traceback.
        print(f"error: {error}", file=sys.stderr)
        return 2


class CommandParser(argparse.ArgumentParser):
    """A command's parser; with `lists_params`, its --help ends with every method's parameters, their valid
    values and help, read from the methods' own declarations (imported only when help is asked for)."""

    lists_params = False

    def format_help(self) -> str:
        if self.lists_params:
            from fwsapp.watermark import METHODS

            lines = ["method parameters (--param KEY=VALUE; default, valid values, meaning):"]
            for name, method in METHODS.items():
                lines.append(f"  {name}")
                for key, default in method.defaults.items():
                    spec = method.param_specs.get(key)
                    detail = f"{spec.describe()}; {spec.help}" if spec else ""
                    lines.append(f"    {key}={default}  {detail}".rstrip())
            self.epilog = "\n".join(lines)
            self.formatter_class = argparse.RawDescriptionHelpFormatter
        return super().format_help()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m fwsapp", description=__doc__)
    commands = parser.add_subparsers(required=True, metavar="COMMAND", parser_class=CommandParser)

    generate = commands.add_parser("generate", help="generate unwatermarked and watermarked outputs; prints the run id")
    generate.add_argument("--task", required=True, choices=["completion", "qa", "summarization"])
    generate.add_argument("--dataset", default="demo", help="'demo' or a JSON, JSONL or CSV file")
    generate.add_argument("--model", default=None, help="registry name, Hugging Face id or local path")
    generate.add_argument("--method", required=True)
    generate.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                          help="a method parameter; each method's are listed below")
    generate.lists_params = True
    generate.add_argument("--n", type=int, default=4)
    generate.add_argument("--max-new-tokens", type=int, default=64)
    generate.add_argument("--batch-size", type=int, default=4)
    generate.add_argument("--seed", type=int, default=42)
    _db(generate)
    generate.set_defaults(handler=cmd_generate)

    runs = commands.add_parser("runs", help="list runs")
    runs.add_argument("--format", choices=["table", "json"], default="table")
    _db(runs)
    runs.set_defaults(handler=cmd_runs)

    export = commands.add_parser("export", help="export one run's samples and scores")
    export.add_argument("--run", required=True)
    export.add_argument("--format", choices=["csv", "parquet"], required=True)
    export.add_argument("--out", required=True)
    _db(export)
    export.set_defaults(handler=cmd_export)

    report = commands.add_parser("report", help="report every run, or the paper's tables")
    report.add_argument("--format", choices=["json", "markdown", "latex"], default="json")
    report.add_argument("--alpha", type=float, default=0.4, help="FWS weight of relevance and factual accuracy")
    report.add_argument("--beta", type=float, default=0.2, help="FWS weight of coherence")
    _db(report)
    report.set_defaults(handler=cmd_report)
    judge = commands.add_parser("judge", help="judge unwatermarked vs watermarked outputs pairwise with an LLM")
    _targets(judge)
    judge.add_argument("--backend", required=True, choices=["openai", "compatible", "local"])
    judge.add_argument("--base-url", help="an OpenAI-compatible server, e.g. http://localhost:8000/v1 (vLLM)")
    judge.add_argument("--judge-model", help="default gpt-4o-2024-08-06 (openai) or the embedded model (local)")
    judge.add_argument("--api-key-env", metavar="VAR",
                       help="the environment variable whose value is sent as the API key (default: OPENAI_API_KEY "
                            "for openai; no key for a compatible server)")
    judge.add_argument("--concurrency", type=int, default=8)
    judge.add_argument("--swap", action="store_true", help="judge both A/B orders and average them")
    judge.add_argument("--budget", type=float, help="stop cleanly once the estimated spend reaches this many US$")
    judge.add_argument("--timeout", type=float, default=60.0, help="seconds per request")
    judge.add_argument("--retry-failed", action="store_true",
                       help="ask again for pairs whose verdict could not be parsed (unreachable pairs always are)")
    judge.add_argument("--max-attempts", type=int, default=6, help="tries per request before a pair is unreachable")
    _db(judge)
    judge.set_defaults(handler=cmd_judge)

    detect = commands.add_parser(
        "detect", help="score a run's stored texts again under any method, parameters and tokenizer",
        description="Re-detect: every stored text of the run (watermarked, unwatermarked, reference) scored as "
                    "MarkLLM's detection scores it. Results are a detection set beside the stored scores.")
    _targets(detect)
    detect.lists_params = True
    detect.add_argument("--method", help="default: the run's own method")
    detect.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                        help="e.g. rng=cpu, cuda_blocks=492, gamma=0.25 (default: the run's parameters)")
    detect.add_argument("--tokenizer", help="mistral-v1, llama-3, a Hugging Face id or a folder "
                        "(default: the one the run's model implies)")
    detect.add_argument("--out", help="write sample_idx,text,score,num_tokens_scored to this CSV file")
    _db(detect)
    detect.set_defaults(handler=cmd_detect)

    score = commands.add_parser("score", help="compute the quality metrics a run lacks")
    _targets(score)
    score.add_argument("--metrics", nargs="+", default=None, metavar="METRIC",
                       help="ppl simcse rouge f1 factuality bertscore (default: all but bertscore)")
    score.add_argument("--oracle", help="perplexity model (default: the run's own model; the embedded one for imports)")
    score.add_argument("--alignscore-checkpoint", help="an AlignScore checkpoint; without it the offline stand-in is used")
    _db(score)
    score.set_defaults(handler=cmd_score)

    analyze = commands.add_parser("analyze", help="entropy and disease-entity analyses a run lacks")
    _targets(analyze)
    analyze.add_argument("--entropy-model", help="model for imported runs' entropies (their generator is not loaded); "
                         "default: skip entropy for imported runs")
    analyze.add_argument("--threshold", type=float, default=0.6, help="hallucination: similarity below this to every reference entity")
    _db(analyze)
    analyze.set_defaults(handler=cmd_analyze)

    importer = commands.add_parser("import", help="import generations, detection scores and judge logs; prints the run id")
    importer.add_argument("--generations", help="JSON list of {watermarked_text, unwatermarked_text, natural_text, prompt?}")
    importer.add_argument("--detection", help='JSON {"watermarked_scores": [...], "unwatermarked_scores": [...]}')
    importer.add_argument("--judged", help="the paper's judge log: JSON list with sample_id, judge_output, scores_U, scores_W, ...")
    importer.add_argument("--method", required=True, help="KGW, SWEET, DiPmark (DIP), EXP-edit (EXPEdit), ...")
    importer.add_argument("--model", required=True)
    importer.add_argument("--task", required=True, choices=["completion", "qa", "summarization"])
    importer.add_argument("--dataset", help="a dataset file whose prompts align by index, when the generations lack them")
    importer.add_argument("--score-direction", choices=["higher", "lower"], help="overrides the method's direction")
    importer.add_argument("--negatives", choices=["reference", "unwatermarked"], default="reference",
                          help="what the unwatermarked scores scored: the human reference (MarkLLM's natural mode, "
                               "as in the paper's logs; default) or the unwatermarked output")
    _db(importer)
    importer.set_defaults(handler=cmd_import)
    return parser


def _targets(parser: argparse.ArgumentParser) -> None:
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--run", action="append", help="a run id (repeatable)")
    target.add_argument("--all", action="store_true", help="every run in the database")


def _db(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", default=str(DEFAULT_DB), help=f"DuckDB file (default {DEFAULT_DB})")


@contextmanager
def progress_bar(description: str, unit: str):
    """A tqdm bar on stderr, driven by the backend's (done, total) progress callbacks."""
    from tqdm import tqdm

    with tqdm(desc=description, unit=unit, file=sys.stderr) as bar:
        def update(done: int, total: int) -> None:
            bar.total = total
            bar.n = done
            bar.refresh()

        yield update


def cmd_generate(args) -> int:
    from fwsapp.generate import RunConfig, run_generation
    from fwsapp.models import EMBEDDED_MODEL, load_model
    from fwsapp.store import Store
    from fwsapp.watermark import parse_params

    if args.dataset != "demo" and not Path(args.dataset).is_file():
        raise ValueError(f"--dataset {args.dataset}: no such file. Use 'demo' or a JSON, JSONL or CSV path.")
    config = RunConfig(
        task=args.task, method=args.method, dataset=args.dataset, model=args.model or EMBEDDED_MODEL,
        params=parse_params(args.method, args.param), n=args.n, max_new_tokens=args.max_new_tokens,
        batch_size=args.batch_size, seed=args.seed,
    )
    config.samples()  # the dataset and n are checked before the database or the model is touched
    store = Store(args.db)
    lm = load_model(config.model)
    with progress_bar(f"{config.method} {config.task}", "sample") as progress:
        run_id = run_generation(config, store, lm, progress=progress)
    print(run_id)
    return 0


def cmd_runs(args) -> int:
    from fwsapp.store import Store

    runs = Store(args.db).runs()
    if args.format == "json":
        print(runs.to_json(orient="records", date_format="iso"))
    elif runs.empty:
        print(f"No runs in {args.db}.")
    else:
        print(runs.drop(columns=["params"]).to_string(index=False))
    return 0


def cmd_export(args) -> int:
    from fwsapp.export import export_run
    from fwsapp.store import Store

    path = export_run(Store(args.db), args.run, args.format, Path(args.out))
    print(path)
    return 0


def cmd_report(args) -> int:
    from fwsapp.report import build_report
    from fwsapp.store import Store
    from fwsapp.tables import render

    report = build_report(Store(args.db), alpha=args.alpha, beta=args.beta)
    print(json.dumps(report, indent=2) if args.format == "json" else render(report, args.format))
    return 0


def cmd_import(args) -> int:
    from fwsapp.importer import LogFile, import_logs
    from fwsapp.store import Store

    files = {
        name: LogFile.from_path(path) if path else None
        for name, path in (("generations", args.generations), ("detection", args.detection), ("judged", args.judged))
    }
    store = Store(args.db)
    run_id = import_logs(
        store, method=args.method, model=args.model, task_name=args.task, dataset=args.dataset,
        score_direction=args.score_direction, negatives=args.negatives, **files,
    )
    print(run_id)
    return 0


def cmd_judge(args) -> int:
    from fwsapp.judge.backends import make_backend
    from fwsapp.judge.runner import JudgeSettings, estimate, plan_pairs, run_judge
    from fwsapp.store import Store

    for option, value in (("--max-attempts", args.max_attempts), ("--concurrency", args.concurrency)):
        if value < 1:
            raise ValueError(f"{option} must be at least 1, not {value}.")
    if args.timeout <= 0 or (args.budget is not None and args.budget < 0):
        raise ValueError("--timeout must be positive and --budget not negative.")
    store = Store(args.db)
    targets = run_ids(store, args)
    api_key = None
    if args.api_key_env:
        api_key = os.environ.get(args.api_key_env)
        if not api_key:
            raise ValueError(f"--api-key-env {args.api_key_env}: that environment variable is not set.")
    backend = make_backend(args.backend, args.judge_model, args.base_url, timeout=args.timeout, api_key=api_key)
    settings = JudgeSettings(concurrency=args.concurrency, swap=args.swap, budget_usd=args.budget,
                             retry_failed=args.retry_failed, max_attempts=args.max_attempts)
    pairs, skipped = plan_pairs(store, targets, backend.model, settings)
    usage, cost = estimate(pairs, backend.model)
    print(f"{len(pairs)} pairs to judge with {backend.model} ({skipped} already judged): about "
          f"{usage.prompt_tokens:,} prompt and {usage.completion_tokens:,} completion tokens"
          + (f", about ${cost:.2f}" if cost is not None else ", cost unknown for this model"), file=sys.stderr)
    with progress_bar(f"judge {backend.model}", "pair") as progress:
        outcome = run_judge(store, targets, backend, settings, progress=progress)
    print(outcome.describe(backend.model))
    if outcome.all_unreachable:
        reasons = "\n".join(f"  {count} × {reason}" for reason, count in outcome.reasons.most_common())
        print(f"error: the judge could not be reached for any of the {outcome.requested} pairs:\n{reasons}\n"
              "Check --base-url, the server and the key; the next run asks for these pairs again.", file=sys.stderr)
        return 1
    return 0


def run_ids(store, args) -> list[str]:
    """The runs a command targets: --all, or each --run checked to exist."""
    ids = list(store.runs().run_id) if args.all else args.run
    for run_id in ids:
        store.run(run_id)  # a clear error for an unknown id
    return ids


def cmd_score(args) -> int:
    from fwsapp.metrics.quality import OFFLINE_METRICS, QualityResources, score_run
    from fwsapp.models import load_model
    from fwsapp.store import Store

    store = Store(args.db)
    models = {}
    resources = QualityResources(
        model_loader=lambda name: models.setdefault(name, load_model(name)) if name not in models else models[name],
        oracle=args.oracle, alignscore_checkpoint=args.alignscore_checkpoint,
    )
    for run_id in run_ids(store, args):
        with progress_bar(f"score {run_id}", "metric") as progress:
            computed = score_run(store, run_id, resources, tuple(args.metrics or OFFLINE_METRICS), progress=progress)
        print(f"{run_id}: " + ", ".join(f"{metric} {count}" for metric, count in computed.items()) + " values computed")
    return 0


def cmd_analyze(args) -> int:
    from fwsapp.encoder import load_encoder
    from fwsapp.entities import analyze_run, load_recognizer
    from fwsapp.entropy import compute_entropies
    from fwsapp.models import load_model
    from fwsapp.store import Store

    store = Store(args.db)
    recognizer, encoder, models = load_recognizer(), load_encoder(), {}
    for run_id in run_ids(store, args):
        run = store.run(run_id)
        name = args.entropy_model if run["imported"] else run["model"]
        lm = None
        if name:
            lm = models.setdefault(name, load_model(name)) if name not in models else models[name]
            with progress_bar(f"entropy {run_id}", "text") as progress:
                computed = compute_entropies(store, run_id, lm, progress=progress)
            print(f"{run_id}: entropies of {computed} texts computed with {name}")
        else:
            print(f"{run_id}: imported, so its generator is not loaded; pass --entropy-model NAME for entropies")
        with progress_bar(f"entities {run_id}", "sample") as progress:
            analysed = analyze_run(store, run_id, recognizer, encoder, lm.tokenizer if lm else None,
                                   threshold=args.threshold, progress=progress)
        print(f"{run_id}: disease entities of {analysed} samples analysed ({recognizer.backend})")
    return 0


def cmd_detect(args) -> int:
    from fwsapp.redetect import redetect, set_scores
    from fwsapp.store import Store
    from fwsapp.tokenizers import load_tokenizer, tokenizer_for_model
    from fwsapp.watermark import method_class, parse_params

    store = Store(args.db)
    targets = run_ids(store, args)
    if args.out and len(targets) != 1:
        raise ValueError("--out writes one run's scores: give a single --run.")
    tokenizers, frames = {}, []
    for run_id in targets:
        run = store.run(run_id)
        method = args.method or run["method"]
        # The run's own parameters carry over when its method is kept; --param overrides them.
        params = {**(run["params"] if method_class(method).name == run["method"] else {}),
                  **parse_params(method, args.param)}
        name = args.tokenizer or tokenizer_for_model(run["model"]) or run["model"]
        if not name:
            raise ValueError(f"{run_id}: its model is unknown, so pass --tokenizer NAME|PATH.")
        if name not in tokenizers:
            tokenizers[name] = load_tokenizer(name)
        tokenizer = tokenizers[name]
        lm = _detector_model(method, name)
        with progress_bar(f"detect {run_id}", "text") as progress:
            set_id = redetect(store, run_id, method, params, tokenizer, lm=lm, progress=progress)
        frames.append(set_scores(store, set_id))
        print(f"{run_id}: detection set {set_id} ({method}, {tokenizer.name})")
    if args.out:
        frames[0].to_csv(args.out, index=False)
        print(args.out)
    return 0


def _detector_model(method: str, name: str):
    """The model a detector runs itself (SWEET's entropies), else None."""
    from fwsapp.watermark import method_class

    if not method_class(method).needs_model:
        return None
    from fwsapp.models import load_model

    return load_model(name)
