"""Command line: `python -m fwsapp generate|runs|export|detect|score|judge|analyze|import|report|recognize|doctor`."""
from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from fwsapp import EXPECTED_ERRORS
from fwsapp.paths import DEFAULT_DB

if TYPE_CHECKING:
    from fwsapp.orchestration.grid import JudgeStep


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        with terminate_cleanly():
            return args.handler(args)
    except EXPECTED_ERRORS as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        # Every step writes whole batches in transactions: what was written stays, and a rerun resumes from it.
        print("Interrupted: everything written before it is kept; run the command again to resume.", file=sys.stderr)
        return INTERRUPTED


INTERRUPTED = 130  # the shell's code for a command ended by Ctrl-C


@contextmanager
def signal_handled(signum: int, handler):
    """`handler` for `signum` while the block runs, the previous one after. Outside the main thread signals cannot be
    caught, and nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signum, handler)
    try:
        yield
    finally:
        signal.signal(signum, previous)


def terminate_cleanly():
    """`kill` (SIGTERM) ends a command as Ctrl-C does: transactions roll back and partial files are removed, where
    Python's default would stop at once and leave them (a `.partial` output of `recognize`)."""
    def interrupt(signum, frame):
        raise KeyboardInterrupt

    return signal_handled(signal.SIGTERM, interrupt)


def first_interrupt_stops(stop: threading.Event, what: str):
    """The first Ctrl-C sets `stop` (the step stops starting work and keeps what arrives); a second one interrupts
    at once."""
    def stop_gently(signum, frame):
        stop.set()
        signal.signal(signal.SIGINT, signal.default_int_handler)
        print(f"\nStopping: {what} (Ctrl-C again to leave now).", file=sys.stderr)

    return signal_handled(signal.SIGINT, stop_gently)


class CommandParser(argparse.ArgumentParser):
    """A command's parser; with `lists_params`, its --help ends with every method's parameters, their valid
    values and help, read from the method registry."""

    lists_params = False

    def format_help(self) -> str:
        if self.lists_params:
            from fwsapp.watermark.methods import params_help

            self.epilog = params_help()
            self.formatter_class = argparse.RawDescriptionHelpFormatter
        return super().format_help()


def build_parser() -> argparse.ArgumentParser:
    from fwsapp.data.tasks import TASKS
    from fwsapp.entities.introduced import HALLUCINATION_THRESHOLD
    from fwsapp.results.fws import DEFAULT_ALPHA, DEFAULT_BETA
    from fwsapp.judge.registry import CONCURRENT_REQUESTS, JUDGE_BACKENDS, REQUEST_TIMEOUT_SECONDS
    from fwsapp.quality.registry import METRICS, default_metrics
    from fwsapp.judge.records import PAPER_JUDGE
    from fwsapp.watermark.methods import METHODS
    from fwsapp.robustness.attacks import ATTACKS, DEFAULT_SEED, attacks_help
    from fwsapp.detection.normalizers import NORMALIZERS

    parser = argparse.ArgumentParser(prog="python -m fwsapp", description=__doc__)
    commands = parser.add_subparsers(required=True, metavar="COMMAND", parser_class=CommandParser)

    generate = commands.add_parser("generate", help="generate unwatermarked and watermarked outputs; prints the run id")
    generate.add_argument("--task", required=True, choices=list(TASKS))
    generate.add_argument("--dataset", default="demo", help="'demo' or a JSON, JSONL or CSV file")
    generate.add_argument("--model", default=None, help="registry name, Hugging Face id or local path")
    method_names = ", ".join(METHODS.names())
    generate.add_argument("--method", required=True, help=f"one of {method_names} (any case, or the paper's spellings)")
    generate.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                          help="a method parameter; each method's are listed below")
    generate.lists_params = True
    generate.add_argument("--n", type=int, default=4)
    generate.add_argument("--max-new-tokens", type=int, default=64)
    generate.add_argument("--batch-size", type=int, default=4)
    generate.add_argument("--seed", type=int, default=42)
    _loading(generate)
    _db(generate)
    generate.set_defaults(handler=cmd_generate)

    runs = commands.add_parser("runs", help="list runs, or delete one with all its rows")
    runs.add_argument("--format", choices=["table", "json"], default="table")
    runs.add_argument("--delete", metavar="ID", help="delete this run and every row that belongs to it (asks first)")
    runs.add_argument("--yes", action="store_true", help="with --delete: do not ask")
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
    report.add_argument("--alpha", type=float, default=DEFAULT_ALPHA, help="FWS weight of relevance and factual accuracy")
    report.add_argument("--beta", type=float, default=DEFAULT_BETA, help="FWS weight of coherence")
    report.add_argument("--include-smoke-tests", action="store_true",
                        help="count the embedded model's smoke-test verdicts in the judge figures (left out by default)")
    _db(report)
    report.set_defaults(handler=cmd_report)
    judge = commands.add_parser("judge", help="judge unwatermarked vs watermarked outputs pairwise with an LLM")
    _targets(judge)
    judge.add_argument("--backend", required=True, choices=JUDGE_BACKENDS.names(),
                       help="; ".join(f"{entry.name}: {entry.help}" for entry in JUDGE_BACKENDS))
    judge.add_argument("--base-url", help="an OpenAI-compatible server, e.g. http://localhost:8000/v1 (vLLM)")
    judge.add_argument("--judge-model", help="default gpt-4o-2024-08-06 (openai) or the embedded model (local)")
    judge.add_argument("--api-key-env", metavar="VAR",
                       help="the environment variable whose value is sent as the API key (default: OPENAI_API_KEY "
                            "for openai; no key for a compatible server)")
    judge.add_argument("--concurrency", type=int, default=CONCURRENT_REQUESTS)
    judge.add_argument("--swap", action="store_true", help="judge both A/B orders and average them")
    judge.add_argument("--budget", type=float, help="stop cleanly once the estimated spend reaches this many US$")
    judge.add_argument("--timeout", type=float, default=REQUEST_TIMEOUT_SECONDS, help="seconds per request")
    judge.add_argument("--retry-failed", action="store_true",
                       help="ask again for pairs whose verdict could not be parsed (unreachable pairs always are)")
    judge.add_argument("--max-attempts", type=int, default=6, help="tries per request before a pair is unreachable")
    _loading(judge)
    _db(judge)
    judge.set_defaults(handler=cmd_judge)

    detect = commands.add_parser(
        "detect", help="score a run's stored texts again under any method, parameters and tokenizer",
        description="Re-detect: every stored text of the run (watermarked, unwatermarked, reference) scored as "
                    "MarkLLM's detection scores it. Results are a detection set beside the stored scores.")
    _targets(detect)
    detect.lists_params = True
    detect.add_argument("--method", help=f"one of {method_names}; default: the run's own method")
    detect.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                        help="e.g. rng=cpu, cuda_blocks=492, gamma=0.25 (default: the run's parameters)")
    detect.add_argument("--tokenizer", help="mistral-v1, llama-3, a Hugging Face id or a folder "
                        "(default: the one the run's model implies)")
    detect.add_argument("--out", help="write sample_idx,text,score,num_tokens_scored to this CSV file")
    detect.add_argument("--normalize", choices=NORMALIZERS,
                        help="map each text before tokenising: unicode (NFKC), homoglyphs (look-alikes back to Latin)")
    detect.add_argument("--by-length", action="store_true",
                        help="print tokens to detect and TPR after T tokens under the run's own method (detecting "
                             "again from text only the runs whose scores at every length are not stored)")
    detect.add_argument("--window", type=int, metavar="TOKENS",
                        help="score each text's best window of this many tokens (WinMax), with a threshold calibrated "
                             "for its length: finds a watermarked span pasted into a longer human text")
    detect.add_argument("--fpr", type=float, default=0.01, help="false-positive rate of --by-length's and --window's "
                        "verdicts (default %(default)s)")
    _loading(detect)
    _db(detect)
    detect.set_defaults(handler=cmd_detect)

    compare = commands.add_parser(
        "compare", help="methods at equal strength: each sweep's setting that reaches a target TPR, and quality there",
        description="Runs that differ only in their method's strength parameter (KGW's delta, DiPmark's alpha, "
                    "SynthID's depth; `grid` makes them) form a sweep. For each sweep, the setting that reaches the "
                    "target TPR at the FPR after the given number of tokens, interpolated between swept runs where "
                    "needed, and FWS and disease entities at that setting.")
    compare.add_argument("--target-tpr", type=float, default=0.9)
    compare.add_argument("--fpr", type=float, default=0.01)
    compare.add_argument("--tokens", type=int, default=64, help="T: the TPR after this many tokens (default %(default)s)")
    compare.add_argument("--runs", nargs="+", metavar="ID", help="the swept runs (default: every run)")
    _db(compare)
    compare.set_defaults(handler=cmd_compare)

    attack = commands.add_parser(
        "attack", help="attack a run's watermarked texts, then detect them again; prints the attack and detection sets",
        description="Robustness: each watermarked text edited by one attack (its parameters and seed), stored beside "
                    "the generations, then scored with the run's method and tokenizer. Rerunning computes nothing; an "
                    "interrupted attack resumes.",
        epilog=attacks_help(), formatter_class=argparse.RawDescriptionHelpFormatter)
    _targets(attack)
    attack.add_argument("--attack", required=True, choices=ATTACKS.names(), help="the attack (listed below)")
    attack.add_argument("--param", action="append", default=[], metavar="KEY=VALUE", help="an attack parameter")
    attack.add_argument("--seed", type=int, default=DEFAULT_SEED, help="draws the edits (default %(default)s)")
    attack.add_argument("--tokenizer", help="as for detect (default: the one the run's model implies)")
    attack.add_argument("--normalize", choices=NORMALIZERS, help="as for detect: the defence against homoglyphs")
    _loading(attack)
    _db(attack)
    attack.set_defaults(handler=cmd_attack)

    score = commands.add_parser("score", help="compute the quality metrics a run lacks")
    _targets(score)
    score.add_argument("--metrics", nargs="+", default=None, metavar="METRIC", choices=METRICS.names(),
                       help="; ".join(f"{entry.name}: {entry.help}" for entry in METRICS)
                       + f" (default: {' '.join(default_metrics())})")
    score.add_argument("--oracle", help="perplexity model (default: the run's own model; the embedded one for imports)")
    score.add_argument("--alignscore-checkpoint", help="an AlignScore checkpoint; without it the offline stand-in is used")
    _recognizer(score, "the offline factual-consistency stand-in's disease recognizer")
    _loading(score)
    _db(score)
    score.set_defaults(handler=cmd_score)

    analyze = commands.add_parser("analyze", help="entropy and disease-entity analyses a run lacks")
    _targets(analyze)
    analyze.add_argument("--entropy-model", help="model for imported runs' entropies (their generator is not loaded); "
                         "default: skip entropy for imported runs")
    analyze.add_argument("--threshold", type=float, default=HALLUCINATION_THRESHOLD,
                         help="hallucination: similarity below this to every reference entity")
    _recognizer(analyze)
    _loading(analyze)
    _db(analyze)
    analyze.set_defaults(handler=cmd_analyze)

    importer = commands.add_parser("import", help="import generations, detection scores and judge logs; prints the run id")
    importer.add_argument("--generations", help="JSON list of {watermarked_text, unwatermarked_text, natural_text, prompt?}")
    importer.add_argument("--detection", help='JSON {"watermarked_scores": [...], "unwatermarked_scores": [...]}')
    importer.add_argument("--judged", help="the paper's judge log: JSON list with sample_id, judge_output, scores_U, scores_W, ...")
    importer.add_argument("--judge-model", default=PAPER_JUDGE,
                          help=f"the model that wrote the judge log's verdicts (default {PAPER_JUDGE}, the paper's judge)")
    importer.add_argument("--method", required=True, help="KGW, SWEET, DiPmark (DIP), EXP-edit (EXPEdit), ...")
    importer.add_argument("--model", required=True)
    importer.add_argument("--task", required=True, choices=list(TASKS))
    importer.add_argument("--dataset", help="a dataset file whose prompts align by index, when the generations lack them")
    importer.add_argument("--score-direction", choices=["higher", "lower"], help="overrides the method's direction")
    importer.add_argument("--negatives", choices=["reference", "unwatermarked"], default="reference",
                          help="what the unwatermarked scores scored: the human reference (MarkLLM's natural mode, "
                               "as in the paper's logs; default) or the unwatermarked output")
    _db(importer)
    importer.set_defaults(handler=cmd_import)

    grid = commands.add_parser(
        "grid", help="run an experiment spec (TOML): its grid of runs, then its score, analyze and judge steps",
        description="Runs every run of the spec that is not stored yet, in this process or on a Ray cluster, then "
                    "the spec's steps. A rerun does only what is missing. See experiments/*.toml.")
    grid.add_argument("spec", help="the spec file, e.g. experiments/demo.toml")
    grid.add_argument("--ray", metavar="ADDRESS", help="run the units on the Ray cluster at ADDRESS (host:port, or "
                      "'local' to start one here); without it, in this process")
    grid.add_argument("--dry-run", action="store_true", help="print the runs and the work still missing; do nothing")
    grid.add_argument("--yes", action="store_true", help="go on with a grid of more than 10,000 runs")
    grid.add_argument("--api-key-env", metavar="VAR", help="the environment variable holding the judge step's key; "
                      "where the spec names one (api_key_env), the same name, to confirm it")
    _loading(grid)
    _db(grid)
    grid.set_defaults(handler=cmd_grid)

    doctor = commands.add_parser("doctor", help="what this setup can run: device, memory, models, tokenizers, backends, database")
    _loading(doctor)
    _db(doctor)
    doctor.set_defaults(handler=cmd_doctor)

    study_command = commands.add_parser(
        "study", help="a clinician study served to a team: create it, invite or revoke raters, follow it, export it")
    actions = study_command.add_subparsers(dest="action", required=True, metavar="ACTION")
    create = actions.add_parser("create", help="draw a study's items from runs and print each rater's invite link")
    create.add_argument("--name", required=True)
    create.add_argument("--runs", nargs="+", required=True, metavar="ID")
    items = create.add_mutually_exclusive_group()
    items.add_argument("--share", type=float, default=0.10, help="share of each run's samples to rate (default 0.10)")
    items.add_argument("--items-per-run", type=int, help="how many samples of each run to rate")
    create.add_argument("--raters-per-item", type=int, default=3)
    create.add_argument("--attention", type=float, default=0.10, help="share of each rater's items shown twice, A and B "
                        "swapped, as attention checks (default 0.10)")
    create.add_argument("--entities", action="store_true", help="also ask for verdicts on each answer's disease names")
    create.add_argument("--seed", type=int, default=0)
    create.add_argument("--rater", action="append", default=[], metavar="NAME",
                        help="invite a rater (repeatable); the name is for the researcher only")
    invite = actions.add_parser("invite", help="invite raters to a study and print their links")
    invite.add_argument("--study", required=True, help="its name or id")
    invite.add_argument("--rater", action="append", required=True, metavar="NAME")
    for action in (create, invite):
        action.add_argument("--url", default="http://localhost:8501", help="where raters reach the app")
    revoke = actions.add_parser("revoke", help="revoke a rater's link at once; their ratings stay")
    revoke.add_argument("--rater", required=True, metavar="RATER_ID")
    status = actions.add_parser("status", help="progress per rater, attention consistency, disagreements")
    status.add_argument("--study", required=True)
    export_study = actions.add_parser("export", help="the study's ratings by rater id (no names, no tokens)")
    export_study.add_argument("--study", required=True)
    export_study.add_argument("--out", required=True, help="a .csv or .parquet file")
    for action in (create, invite, revoke, status, export_study):
        _db(action)
    study_command.set_defaults(handler=cmd_study)

    recognize = commands.add_parser(
        "recognize", help="disease mentions of each text of a JSONL file",
        description='Each input line {"text": ...} gives one output line {"entities": [[start, end, text], ...]} '
                    "(character offsets), in input order.")
    recognize.add_argument("--in", dest="source", required=True, help="JSONL file, one {\"text\": ...} object a line")
    recognize.add_argument("--out", required=True, help="JSONL file to write (only once every line is done)")
    recognize.add_argument("--force", action="store_true", help="replace --out if it is an existing file")
    _recognizer(recognize)
    recognize.set_defaults(handler=cmd_recognize)
    return parser


def _recognizer(parser: argparse.ArgumentParser, what: str = "the disease recognizer") -> None:
    from fwsapp.entities.recognizers import DEFAULT_RECOGNIZER, RECOGNIZERS

    parser.add_argument("--recognizer", default=DEFAULT_RECOGNIZER, choices=RECOGNIZERS.names(),
                        help=f"{what}: " + "; ".join(f"{entry.name}: {entry.help}" for entry in RECOGNIZERS))


def _targets(parser: argparse.ArgumentParser) -> None:
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--run", action="append", help="a run id (repeatable)")
    target.add_argument("--all", action="store_true", help="every run in the database")


def _loading(parser: argparse.ArgumentParser) -> None:
    from fwsapp.models import DTYPES

    parser.add_argument("--device", help="where models run: cpu, cuda or cuda:N (default: the first GPU, else cpu)")
    parser.add_argument("--dtype", choices=DTYPES, help="weights' precision (default: bf16 on a GPU that has it, "
                        "else fp16; fp32 on cpu)")


def _db(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", default=str(DEFAULT_DB), help=f"DuckDB file (default {DEFAULT_DB})")


@contextmanager
def progress_bar(description: str, unit: str):
    """A tqdm bar on stderr, driven by the backend's (done, total) progress callbacks. It appears at the first report,
    so input refused before any work is one line, with no empty bar before it."""
    from tqdm import tqdm

    bar = None

    def update(done: int, total: int, note: str = "") -> None:
        nonlocal bar
        if bar is None:
            bar = tqdm(desc=description, unit=unit, file=sys.stderr)
        bar.total = total
        bar.n = done
        bar.set_postfix_str(note, refresh=False)
        bar.refresh()

    try:
        yield update
    finally:
        if bar is not None:
            bar.close()


def cmd_generate(args) -> int:
    from fwsapp.orchestration import pipeline
    from fwsapp.generation.generate import RunConfig
    from fwsapp.watermark.methods import parse_params
    from fwsapp.models import EMBEDDED_MODEL
    from fwsapp.store import Store

    if args.dataset != "demo" and not Path(args.dataset).is_file():
        raise ValueError(f"--dataset {args.dataset}: no such file. Use 'demo' or a JSON, JSONL or CSV path.")
    config = RunConfig(
        task=args.task, method=args.method, dataset=args.dataset, model=args.model or EMBEDDED_MODEL,
        params=parse_params(args.method, args.param), n=args.n, max_new_tokens=args.max_new_tokens,
        batch_size=args.batch_size, seed=args.seed,
    )
    config.samples()  # the dataset and n are checked before the database or the model is touched
    loader = model_loader(args)
    loader(config.model)  # a model that cannot load is one error line, before the database is opened
    store = Store(args.db)
    with progress_bar(f"{config.method} {config.task}", "sample") as progress:
        [run_id] = pipeline.generate(store, [config], loader, progress=progress)
    print(run_id)
    return 0


def cmd_study(args) -> int:
    from fwsapp.human import study
    from fwsapp.human.access import invite_link
    from fwsapp.store import Store

    store = Store(args.db)
    if args.action == "create":
        created, invites = study.create(store, args.name, args.runs, args.share, args.items_per_run,
                                        args.raters_per_item, args.attention, args.entities, args.seed, args.rater)
        print(f"{created.study_id}: {len(store.study_items(created.study_id))} items")
    elif args.action == "invite":
        invites = study.invite(store, study.study(store, args.study), args.rater)
    elif args.action == "revoke":
        study.revoke(store, args.rater)
        print(f"{args.rater}: revoked")
        return 0
    elif args.action == "status":
        chosen = study.study(store, args.study)
        print(study.rater_progress(store, chosen).to_string(index=False))
        disagreements = study.disagreements(study.ratings(store, chosen))
        print(f"\n{len(disagreements)} aspects of texts whose raters are {study.DISAGREEMENT}+ points apart")
        return 0
    else:
        rows = study.export(store, study.study(store, args.study), args.out)
        print(f"{rows} rows written to {args.out}")
        return 0
    if invites:
        print("Send each rater their link; it is shown only now (only its hash is stored):", file=sys.stderr)
    for invite in invites:
        print(f"{invite.rater_id}\t{invite.name}\t{invite_link(args.url, invite.token)}")
    return 0


def cmd_runs(args) -> int:
    from fwsapp.store import Store

    if args.delete is not None:
        if not args.delete.strip():
            raise ValueError("--delete needs a run id: `python -m fwsapp runs` lists them.")
        store = Store(args.db)
        run = store.run(args.delete)  # an unknown id: one line, nothing asked
        if not args.yes and not sys.stdin.isatty():  # a script or CI: nobody to answer
            raise ValueError(f"--delete {args.delete}: no terminal to confirm on; add --yes to delete without asking.")
        if not args.yes:
            answer = input(f"Delete run {args.delete} ({run['method']}, {run['task']}, {run['model']}) and every row "
                           "that belongs to it? Type the run id to confirm: ")
            if answer.strip() != args.delete:
                print("Not deleted.")
                return 1
        deleted = store.delete_run(args.delete)
        print(f"Deleted run {args.delete}: " + ", ".join(f"{table} {count}" for table, count in deleted.items() if count))
        return 0
    runs = Store(args.db).runs()
    if args.format == "json":
        print(runs.to_json(orient="records", date_format="iso"))
    elif runs.empty:
        print(f"No runs in {args.db}.")
    else:
        print(runs.drop(columns=["params"]).to_string(index=False))
    return 0


def cmd_export(args) -> int:
    from fwsapp.results.export import export_run
    from fwsapp.store import Store

    path = export_run(Store(args.db), args.run, args.format, Path(args.out))
    print(path)
    return 0


def cmd_report(args) -> int:
    from fwsapp.results.report import build_report
    from fwsapp.store import Store
    from fwsapp.results.tables import render

    report = build_report(Store(args.db), alpha=args.alpha, beta=args.beta, include_smoke_tests=args.include_smoke_tests)
    if report["smoke_tests_left_out"]:
        print(f"Left out the smoke-test verdicts of {', '.join(report['smoke_tests_left_out'])} "
              "(--include-smoke-tests counts them).", file=sys.stderr)
    print(json.dumps(report, indent=2) if args.format == "json" else render(report, args.format))
    return 0


def cmd_import(args) -> int:
    from fwsapp.data.importer import LogFile, import_logs
    from fwsapp.store import Store

    files = {
        name: LogFile.from_path(path) if path else None
        for name, path in (("generations", args.generations), ("detection", args.detection), ("judged", args.judged))
    }
    store = Store(args.db)
    present = set(store.runs().run_id)
    run_id = import_logs(
        store, method=args.method, model=args.model, task_name=args.task, dataset=args.dataset,
        score_direction=args.score_direction, negatives=args.negatives, judge_model=args.judge_model, **files,
    )
    if run_id in present:
        print(f"Already imported as run {run_id}: nothing changed.", file=sys.stderr)
    print(run_id)
    return 0


def cmd_judge(args) -> int:
    from fwsapp.orchestration import pipeline
    from fwsapp.judge.backends import local_minutes
    from fwsapp.judge.registry import JUDGE_BACKENDS
    from fwsapp.judge.runner import JudgeSettings, estimate, plan_pairs
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
    settings = JudgeSettings(concurrency=args.concurrency, swap=args.swap, budget_usd=args.budget,
                             retry_failed=args.retry_failed, max_attempts=args.max_attempts)
    loader = model_loader(args)
    backend = pipeline.judge_backend(loader, args.backend, args.judge_model, args.base_url, args.timeout, api_key)
    judge_model = backend.model
    pairs, skipped = plan_pairs(store, targets, judge_model, settings)
    usage, cost = estimate(pairs, judge_model)
    print(f"{len(pairs)} pairs to judge with {judge_model} ({skipped} already judged): about "
          f"{usage.prompt_tokens:,} prompt and {usage.completion_tokens:,} completion tokens"
          + (f", no cost, about {local_minutes(len(pairs))} min here" if JUDGE_BACKENDS[args.backend].in_process
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


def run_ids(store, args) -> list[str]:
    """The runs a command targets: --all, or each --run checked to exist."""
    ids = list(store.runs().run_id) if args.all else args.run
    for run_id in ids:
        store.run(run_id)  # a clear error for an unknown id
    return ids


def model_loader(args):
    """Each model loaded once for the command's lifetime, on the command's --device in its --dtype."""
    from functools import lru_cache

    from fwsapp.models import load_model

    return lru_cache(maxsize=None)(lambda name: load_model(name, device=args.device, dtype=args.dtype))


def cmd_score(args) -> int:
    from fwsapp.orchestration import pipeline
    from fwsapp.quality.registry import METRICS
    from fwsapp.store import Store

    store = Store(args.db)
    targets = run_ids(store, args)
    with progress_bar("score", "sample × metric") as progress:
        counts = pipeline.score(store, targets, model_loader(args), progress, metrics=args.metrics, oracle=args.oracle,
                                alignscore_checkpoint=args.alignscore_checkpoint, recognizer=args.recognizer)
    for run_id, computed in counts.items():
        print(f"{run_id}: " + ", ".join(f"{metric} {count}" for metric, count in computed.items() if count is not None)
              + " values computed" + "".join(f"; {metric} skipped: {METRICS[metric].skipped_because}"
                                             for metric, count in computed.items() if count is None))
    return 0


def cmd_analyze(args) -> int:
    from fwsapp.orchestration import pipeline
    from fwsapp.store import Store

    store = Store(args.db)
    targets = run_ids(store, args)
    with progress_bar("analyze", "sample") as progress:
        analysis = pipeline.analyze(store, targets, model_loader(args), progress, entropy_model=args.entropy_model,
                                    threshold=args.threshold, recognizer=args.recognizer)
    for run_id, computed in analysis.entropies.items():
        if computed is None:
            print(f"{run_id}: imported, so its generator is not loaded; pass --entropy-model NAME for entropies")
        else:
            print(f"{run_id}: entropies of {computed} texts stored")
        print(f"{run_id}: disease entities of {analysis.entities[run_id]} samples analysed ({analysis.recognizer})")
    return 0


def cmd_grid(args) -> int:
    from fwsapp.orchestration import pipeline
    from fwsapp.orchestration.grid import load_spec, plan
    from fwsapp.judge.backends import api_key_from_environment
    from fwsapp.judge.registry import JUDGE_BACKENDS
    from fwsapp.store import Store

    spec = load_spec(args.spec, allow_large=args.yes)  # every key checked before anything else
    api_key = confirmed_judge_key(args.spec, spec.steps.judge, args.api_key_env)
    judge_backend = JUDGE_BACKENDS[spec.steps.judge.backend] if spec.steps.judge else None
    if judge_backend and "key" in judge_backend.needs and not (api_key or os.environ.get(judge_backend.key_env)
                                                                or api_key_from_environment()):
        raise ValueError(f"{args.spec}: [steps] judge uses {judge_backend.menu_label}, and no key is set: set "
                         f"{judge_backend.key_env} before the grid starts (it would fail after generation).")
    if args.dry_run:
        store = Store(args.db, read_only=True) if Path(args.db).exists() else None
        table = plan(spec, store)
        print(table.to_string(index=False))
        print(f"{len(table)} runs; {int(table['units missing'].sum())} of {int(table['units'].sum())} units to generate"
              + (f"; then {', '.join(spec.steps.names())}" if spec.steps.names() else ""))
        return 0
    executor = None
    if args.ray:
        from fwsapp.orchestration.distributed import RayExecutor

        executor = RayExecutor(args.ray, device=args.device, dtype=args.dtype)
    store = Store(args.db)
    with progress_bar(f"grid {Path(args.spec).name}", "sample") as progress:
        outcome = pipeline.grid(store, spec, model_loader(args), progress, executor=executor, api_key=api_key)
    for run_id in outcome.run_ids:
        print(f"{run_id}: " + (f"failed: {outcome.failed[run_id]}" if run_id in outcome.failed else "done"))
    for entry in outcome.attacked:
        if entry.attack_set:
            print(f"{entry.run_id}: attack set {entry.attack_set}, detection set {entry.set_id}")
    if outcome.judged is not None and outcome.judged.problem():  # as `judge` says it, and with its exit code
        print(f"error: judge step: {outcome.judged.problem()}", file=sys.stderr)
        return 1
    return 1 if outcome.failed else 0


def confirmed_judge_key(spec_name: str, judge: JudgeStep | None, confirmed: str | None) -> str | None:
    """The judge's key for a spec, read only from the variable the command line names. Specs are shared and re-run,
    so a spec never chooses which secret leaves this machine: the variable it names must be confirmed by the same
    --api-key-env, and where the key goes is said (on stderr) before anything is sent."""
    named = judge.api_key_env if judge else None
    if named and confirmed != named:
        raise ValueError(f"{spec_name}: [steps] judge would send the key in ${named}; a spec does not choose which "
                         f"secret leaves this machine: confirm it with --api-key-env {named}"
                         + (f" (not {confirmed})." if confirmed else "."))
    if not confirmed:
        return None
    if not judge:
        raise ValueError(f"--api-key-env {confirmed}: {spec_name} has no [steps] judge to send a key to.")
    key = os.environ.get(confirmed)
    if not key:
        raise ValueError(f"--api-key-env {confirmed}: that environment variable is not set.")
    url = judge.base_url
    if url is None:
        print(f"The judge key in ${confirmed} goes to OpenAI's API.", file=sys.stderr)
    elif not loopback(url):
        print(f"The judge key in ${confirmed} goes to {url}, which is not this machine.", file=sys.stderr)
    return key


def loopback(url: str) -> bool:
    """Whether a URL's host is this machine (localhost or a loopback address)."""
    import ipaddress
    from urllib.parse import urlsplit

    host = urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def cmd_doctor(args) -> int:
    from fwsapp.orchestration.doctor import checks

    for check in checks(Path(args.db), device=args.device, dtype=args.dtype):
        print(f"{check.status:<8}{check.topic:<11}{check.item:<38} {check.detail}")
    return 0


def cmd_recognize(args) -> int:
    from fwsapp.entities.recognizers.base import recognize_jsonl
    from fwsapp.entities.recognizers import check_recognizer

    check_recognizer(args.recognizer)
    with progress_bar("recognize", "text") as progress:
        count = recognize_jsonl(args.source, args.out, args.recognizer, progress, force=args.force,
                                warn=lambda line: print(f"warning: {line}", file=sys.stderr))
    print(f"{args.out}: disease mentions of {count} texts ({args.recognizer})")
    return 0


def cmd_attack(args) -> int:
    from fwsapp.orchestration import pipeline
    from fwsapp.watermark.methods import split_pair
    from fwsapp.store import Store

    store = Store(args.db)
    targets = run_ids(store, args)
    params = dict(split_pair(pair) for pair in args.param)
    with progress_bar(f"attack {args.attack}", "text") as progress:
        sets = pipeline.attack(store, targets, model_loader(args), progress, attack=args.attack, params=params,
                               seed=args.seed, tokenizer=args.tokenizer, normalize=args.normalize)
    for entry in sets:
        if entry.attack_set:
            print(f"{entry.run_id}: attack set {entry.attack_set}, detection set {entry.set_id} "
                  f"({entry.method}, {entry.tokenizer})")
    return 0


def cmd_detect(args) -> int:
    from fwsapp.orchestration import pipeline
    from fwsapp.watermark.methods import parse_params
    from fwsapp.detection.redetect import set_scores
    from fwsapp.store import Store

    store = Store(args.db)
    targets = run_ids(store, args)
    if args.out and len(targets) != 1:
        raise ValueError("--out writes one run's scores: give a single --run.")
    if not 0 < args.fpr < 1:
        raise ValueError(f"--fpr must be in (0, 1), not {args.fpr}.")
    if args.by_length:
        if args.method or args.param or args.normalize or args.window or args.out:
            raise ValueError("--by-length reads each run under its own method and parameters: drop --method, --param, "
                             "--normalize, --window and --out.")
        return print_lengths(store, targets, args)
    params = parse_params(args.method or store.run(targets[0])["method"], args.param) if args.param else {}
    with progress_bar("detect", "text") as progress:
        sets = pipeline.detect(store, targets, model_loader(args), progress, method=args.method, params=params,
                               tokenizer=args.tokenizer, normalize=args.normalize, window=args.window)
    for entry in sets:
        print(f"{entry.run_id}: detection set {entry.set_id} ({entry.method}, {entry.tokenizer})")
        if args.window:
            print("  " + windowed_rates(store, entry.set_id, entry.method, args.window, args.fpr))
    if args.out:
        set_scores(store, sets[0].set_id).to_csv(args.out, index=False)
        print(args.out)
    return 0


def windowed_rates(store, set_id: str, method: str, window: int, fpr: float) -> str:
    """What a WinMax set found: the share of watermarked texts and of negatives whose best window passes the threshold
    calibrated for their length at `fpr`."""
    from fwsapp.detection.roc import negative_kind

    scores = store.redetections([set_id]).dropna(subset=["p"])
    negative = negative_kind(set(scores.text_kind), method)
    shares = {kind: (scores.loc[scores.text_kind == kind, "p"] < fpr) for kind in ("watermarked", negative)}
    said = [f"{kind} {found.mean():.2f} ({int(found.sum())} of {len(found)})" for kind, found in shares.items() if len(found)]
    return f"best {window}-token window past its {fpr:.0%} threshold: " + ", ".join(said)


def print_lengths(store, targets: list[str], args) -> int:
    from fwsapp.orchestration import pipeline
    from fwsapp.detection.length import length_summary, run_curves

    with progress_bar("detect by length", "text") as progress:
        pipeline.lengths(store, targets, model_loader(args), progress, tokenizer=args.tokenizer)
    for run_id in targets:
        curves = run_curves(store, run_id)
        if curves is None:
            print(f"{run_id}: no scores by length ({store.run(run_id)['method']} is post-hoc or its texts are missing)")
            continue
        summary = length_summary(curves.method, curves.params, curves.positives, curves.negatives, args.fpr)
        found = summary["tokens_to_detect"]
        source = "its own detection" if curves.source == "generation" else f"detection set {curves.source}"
        print(f"{run_id} ({curves.method}; {source}); verdicts at {summary['threshold']}")
        print(f"  tokens to detect: median {_tokens(found['median'])}, IQR {_tokens(found['iqr'][0])}–"
              f"{_tokens(found['iqr'][1])}; never detected {found['never_detected']} of {found['n']}")
        print(f"  {'T':>6} {'texts':>6} {'TPR':>6} {curves.negative_kind:>14} {'FPR':>6}")
        for size, row in summary["tpr_at_length"].items():
            print(f"  {size:>6} {row['n']:>6} {_rate(row['tpr']):>6} {row['negatives']:>14} {_rate(row['fpr']):>6}")
    return 0


def _tokens(value) -> str:
    return "–" if value is None else value if isinstance(value, str) else f"{value:g}"


def _rate(value) -> str:
    return "–" if value is None else f"{value:.2f}"


def cmd_compare(args) -> int:
    from fwsapp.results.report import build_report
    from fwsapp.store import Store
    from fwsapp.detection.strength import QUALITY, check_target, equal_strength

    check_target(args.target_tpr, args.fpr, args.tokens)
    store = Store(args.db)
    if args.runs:
        for run_id in args.runs:
            store.run(run_id)
    points, table = equal_strength(store, build_report(store), args.target_tpr, args.fpr, args.tokens, args.runs)
    if points.empty:
        print("No sweep to compare: compare needs runs with scores by length (`detect --by-length`) whose methods "
              "have a strength parameter; `grid experiments/strength.toml` makes such a sweep.")
        return 1
    print(f"Equal strength: TPR {args.target_tpr:g} at {args.fpr:.0%} FPR after {args.tokens} tokens")
    if table.empty:
        print("No run has a TPR at this length: see why beside each run.")
    else:
        shown = table[["method", "model", "task", "strength", "value", "setting", *QUALITY]]
        print(shown.to_string(index=False, float_format=lambda value: f"{value:.3g}"))
    print("\nSwept runs:")
    print(points[["method", "task", "strength", "value", "tpr", "basis", "run_id"]].to_string(
        index=False, float_format=lambda value: f"{value:.3g}"))
    return 1 if table.empty else 0
