"""`runs`, `export`, `import`, `report`: the stored runs, listed, deleted, exported, imported and reported."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from fwsapp.cli.options import command, output_file, task_option
from fwsapp.cli.terminal import deletion_confirmed, existing_store, table_text


def register(commands) -> None:
    from fwsapp.judge.records import PAPER_JUDGE
    from fwsapp.results.export import EXPORT_FORMATS
    from fwsapp.results.fws import DEFAULT_ALPHA, DEFAULT_BETA

    runs = command(commands, cmd_runs, "runs", help="list runs, or delete one with all its rows")
    runs.add_argument("--format", choices=["table", "json"],
                      help="table: a line per run for people; json: the stored columns (default table)")
    runs.add_argument("--delete", metavar="ID", help="delete this run and every row that belongs to it (asks first)")
    runs.add_argument("--yes", action="store_true", help="with --delete: do not ask")

    export = command(commands, cmd_export, "export", help="export one run's samples and scores",
                     description="A row per sample: the prompt, the reference and both texts (with their token ids), "
                                 "the detection scores (score_<kind>), each text's evidence record where `detect "
                                 "--evidence` kept one (the text detected again from its words, as the service reads "
                                 "it: for a generated run its score can differ from score_<kind>, scored on the ids "
                                 "the model generated), each stored quality metric per text (quality_<metric>_<kind>, "
                                 "under the metric's main config, as the report reads it) and the judge's 1-5 scores "
                                 "(judge_<aspect>_<kind>, the mean of its verdicts in both orders; judge_verdicts, "
                                 "judge_model) of one judge, never several pooled.")
    export.add_argument("--run", required=True, help="the run's id (`runs` lists them)")
    export.add_argument("--judge", metavar="MODEL",
                        help="whose verdicts the judge columns hold (default: the judge that judged the run most, a "
                             "smoke test only where no other did)")
    export.add_argument("--format", choices=EXPORT_FORMATS, help="(default: by --out's suffix)")
    output_file(export, "the file to write", required=True)

    report = command(commands, cmd_report, "report", help="report every run, or the paper's tables")
    report.add_argument("--format", choices=["json", "markdown", "latex"], default="json",
                        help="json: every figure of every run; markdown or latex: the paper's tables (default %(default)s)")
    report.add_argument("--alpha", type=float, default=DEFAULT_ALPHA, help="FWS weight of relevance and factual accuracy")
    report.add_argument("--beta", type=float, default=DEFAULT_BETA, help="FWS weight of coherence")
    report.add_argument("--include-smoke-tests", action="store_true",
                        help="count the embedded model's smoke-test verdicts in the judge figures (left out by default)")
    report.add_argument("--judge", metavar="MODEL", help="the judge whose verdicts the judge figures count: one judge's, "
                        "never several pooled (default: the one with the most parsed verdicts)")

    importer = command(commands, cmd_import, "import",
        help="import generations, detection scores and judge logs; prints the run id")
    importer.add_argument("--generations", help="JSON list of {watermarked_text, unwatermarked_text, natural_text, prompt?}")
    importer.add_argument("--detection", help='JSON {"watermarked_scores": [...], "unwatermarked_scores": [...]}')
    importer.add_argument("--judged", help="the paper's judge log: JSON list with sample_id, judge_output, scores_U, scores_W, ...")
    importer.add_argument("--judge-model", default=PAPER_JUDGE,
                          help=f"the model that wrote the judge log's verdicts (default {PAPER_JUDGE}, the paper's judge)")
    importer.add_argument("--method", required=True, help="KGW, SWEET, DiPmark (DIP), EXP-edit (EXPEdit), ...")
    importer.add_argument("--model", required=True, help="the model that generated the texts, as the run will name it")
    task_option(importer, "the task the texts answer")
    importer.add_argument("--dataset", help="a dataset file whose prompts align by index, when the generations lack them")
    importer.add_argument("--score-direction", choices=["higher", "lower"], help="overrides the method's direction")
    importer.add_argument("--negatives", choices=["reference", "unwatermarked"], default="reference",
                          help="what the unwatermarked scores scored: the human reference (MarkLLM's natural mode, "
                               "as in the paper's logs; default) or the unwatermarked output")
    importer.lists_params = True
    importer.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                          help="a watermark setting the files' names do not carry, which every later stage reads from "
                               "the run: e.g. cuda_blocks=492 for a Llama-3 log made on an RTX 3090-class GPU, as the "
                               "paper's jsl summarization logs were (docs/methods.md)")


def cmd_runs(args) -> int:
    if args.delete is None and args.yes:
        raise ValueError("--yes confirms --delete: add --delete ID, or drop it.")
    if args.delete is not None and args.format:
        raise ValueError("--format is the listing's: --delete prints what it deleted; drop --format.")
    if args.delete is not None:
        if not args.delete.strip():
            raise ValueError("--delete needs a run id: `python -m fwsapp runs` lists them.")
        store = existing_store(args.db)
        run = store.run(args.delete)  # an unknown id: one line, nothing asked
        if not deletion_confirmed(f"--delete {args.delete}", f"Delete run {args.delete} ({run['method']}, {run['task']}, "
                                  f"{run['model']}) and every row that belongs to it?", args.delete, args.yes):
            return 1
        deleted = store.delete_run(args.delete)
        print(f"Deleted run {args.delete}: " + ", ".join(f"{table} {count}" for table, count in deleted.items() if count))
        return 0
    runs = existing_store(args.db).runs()
    if args.format == "json":
        print(runs.to_json(orient="records", date_format="iso"))
    elif runs.empty:
        print(f"No runs in {args.db}.")
    else:
        from fwsapp.results.run_names import listing

        print(table_text(listing(runs)))
    return 0


def cmd_export(args) -> int:
    from fwsapp.results.export import export_run

    path = export_run(existing_store(args.db), args.run, args.format, Path(args.out), force=args.force,
                      judge=args.judge)
    print(path)
    return 0


def cmd_report(args) -> int:
    from fwsapp.results.fws import check_weights
    from fwsapp.results.report import build_report
    from fwsapp.results.tables import render

    check_weights(args.alpha, args.beta)  # before the database is looked for
    report = build_report(existing_store(args.db), alpha=args.alpha, beta=args.beta,
                          include_smoke_tests=args.include_smoke_tests, judge=args.judge)
    if report["smoke_tests_left_out"]:
        print(f"Left out the smoke-test verdicts of {', '.join(report['smoke_tests_left_out'])} "
              "(--include-smoke-tests counts them).", file=sys.stderr)
    if others := [model for model in report["judge_choices"] if model != report["judge_model"]]:
        print(f"The judge figures are {report['judges']}'s; {', '.join(others)} also judged "
              "(--judge MODEL counts another's).", file=sys.stderr)
    print(json.dumps(report, indent=2) if args.format == "json" else render(report, args.format))
    return 0


def cmd_import(args) -> int:
    from fwsapp.orchestration.importer import LogFile, read_logs, store_logs
    from fwsapp.store import Store

    files = {
        name: LogFile.from_path(path) if path else None
        for name, path in (("generations", args.generations), ("detection", args.detection), ("judged", args.judged))
    }
    read = read_logs(method=args.method, model=args.model, task_name=args.task, dataset=args.dataset,
                     score_direction=args.score_direction, negatives=args.negatives, judge_model=args.judge_model,
                     params=args.param, **files)
    store = Store(args.db)  # once the logs are read: a refused one leaves no database behind
    present = set(store.runs().run_id)
    run_id = store_logs(store, read)
    if run_id in present:
        print(f"Already imported as run {run_id}: nothing changed.", file=sys.stderr)
    print(run_id)
    return 0
