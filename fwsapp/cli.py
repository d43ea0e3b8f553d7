"""Command line: `python -m fwsapp generate|runs|export|report`."""
from __future__ import annotations

import argparse
import json
import sys
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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m fwsapp", description=__doc__)
    commands = parser.add_subparsers(required=True, metavar="COMMAND")

    generate = commands.add_parser("generate", help="generate unwatermarked and watermarked outputs; prints the run id")
    generate.add_argument("--task", required=True, choices=["completion", "qa", "summarization"])
    generate.add_argument("--dataset", default="demo", help="'demo' or a JSON, JSONL or CSV file")
    generate.add_argument("--model", default=None, help="registry name, Hugging Face id or local path")
    generate.add_argument("--method", required=True)
    generate.add_argument("--param", action="append", default=[], metavar="KEY=VALUE")
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
    importer = commands.add_parser("import", help="import generations, detection scores and judge logs; prints the run id")
    importer.add_argument("--generations", help="JSON list of {watermarked_text, unwatermarked_text, natural_text, prompt?}")
    importer.add_argument("--detection", help='JSON {"watermarked_scores": [...], "unwatermarked_scores": [...]}')
    importer.add_argument("--judged", help="the paper's judge log: JSON list with sample_id, judge_output, scores_U, scores_W, ...")
    importer.add_argument("--method", required=True, help="KGW, SWEET, DiPmark (DIP), EXP-edit (EXPEdit), ...")
    importer.add_argument("--model", required=True)
    importer.add_argument("--task", required=True, choices=["completion", "qa", "summarization"])
    importer.add_argument("--dataset", help="a dataset file whose prompts align by index, when the generations lack them")
    importer.add_argument("--score-direction", choices=["higher", "lower"], help="overrides the method's direction")
    _db(importer)
    importer.set_defaults(handler=cmd_import)
    return parser


def _db(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", default=str(DEFAULT_DB), help=f"DuckDB file (default {DEFAULT_DB})")


def cmd_generate(args) -> int:
    from tqdm import tqdm

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
    store = Store(args.db)
    lm = load_model(config.model)
    with tqdm(total=config.n, desc=f"{config.method} {config.task}", unit="sample", file=sys.stderr) as bar:
        def progress(done: int, total: int) -> None:
            bar.total = total
            bar.n = done
            bar.refresh()

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
        score_direction=args.score_direction, **files,
    )
    print(run_id)
    return 0
