"""`generate`: a run's unwatermarked and watermarked outputs."""
from __future__ import annotations

from pathlib import Path

from fwsapp.cli.options import command
from fwsapp.cli.terminal import model_loader, progress_bar


def register(commands) -> None:
    from fwsapp.data.tasks import TASKS
    from fwsapp.watermark.methods import METHODS

    generate = command(commands, cmd_generate, "generate", models=True,
        help="generate unwatermarked and watermarked outputs; prints the run id")
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
