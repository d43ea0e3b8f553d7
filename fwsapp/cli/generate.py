"""`generate`: a run's unwatermarked and watermarked outputs."""
from __future__ import annotations

from pathlib import Path

from fwsapp.cli.options import command, refuse_unused_loading, task_option
from fwsapp.cli.terminal import model_loader, progress_bar


def register(commands) -> None:
    from fwsapp.models.server import ATTEMPTS, CONCURRENT_REQUESTS, REQUEST_TIMEOUT_SECONDS
    from fwsapp.watermark.methods import METHODS

    generate = command(commands, cmd_generate, "generate", models=True,
        help="generate unwatermarked and watermarked outputs; prints the run id")
    task_option(generate, "the task whose prompts are answered")
    generate.add_argument("--dataset", default="demo", help="'demo' or a JSON, JSONL or CSV file")
    generate.add_argument("--model", default=None, help="registry name, Hugging Face id or local path")
    method_names = ", ".join(METHODS.names())
    generate.add_argument("--method", required=True, help=f"one of {method_names} (any case, or the paper's spellings)")
    generate.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                          help="a method parameter; each method's are listed below")
    generate.lists_params = True
    generate.add_argument("--n", type=int, default=4, help="how many of the dataset's prompts, from its first (default %(default)s)")
    generate.add_argument("--max-new-tokens", type=int, default=64,
                          help="tokens per output: every output is this long, as in the paper (default %(default)s)")
    generate.add_argument("--batch-size", type=int, default=4,
                          help="prompts generated together; a run resumes from its last whole batch (default %(default)s)")
    generate.add_argument("--seed", type=int, default=42, help="seeds the sampling; same seed, same texts (default %(default)s)")
    served = generate.add_argument_group(
        "through a serving engine", "Ask the user's OpenAI-compatible server (vllm serve … --watermark-config …) for each "
        "answer, watermarked and with \"watermarking\": false, instead of generating here. The method and its key are "
        "the engine's watermark configuration; give the key as --param 'key=$VAR' to keep it in an environment variable.")
    served.add_argument("--server", metavar="URL", help="the server's base URL, e.g. http://localhost:8000/v1")
    served.add_argument("--served-model", metavar="NAME", help="the model name it serves (default: its only one)")
    served.add_argument("--api-key-env", metavar="VAR", help="the environment variable holding its API key, if it wants one")
    served.add_argument("--tokenizer", metavar="NAME", help="the served model's tokenizer (default: the one its name "
                        "implies), for the detector's vocabulary and answers returned without token ids")
    served.add_argument("--concurrency", type=int, default=CONCURRENT_REQUESTS,
                        help="requests in flight at once (default %(default)s)")
    served.add_argument("--timeout", type=float, default=REQUEST_TIMEOUT_SECONDS, metavar="SECONDS",
                        help="how long one answer may take to arrive whole, from connecting to its last byte "
                             "(default %(default)g); a server silent that long is tried again, then given up")
    served.add_argument("--attempts", type=int, default=ATTEMPTS,
                        help="tries per answer, the first included, before the job stops (default %(default)s)")


def cmd_generate(args) -> int:
    from fwsapp.orchestration import pipeline
    from fwsapp.generation.run_config import RunConfig
    from fwsapp.watermark.methods import parse_params
    from fwsapp.models import EMBEDDED_MODEL
    from fwsapp.models.server import ATTEMPTS, CONCURRENT_REQUESTS, REQUEST_TIMEOUT_SECONDS
    from fwsapp.store import Store

    if args.dataset != "demo" and not Path(args.dataset).is_file():
        raise ValueError(f"--dataset {args.dataset}: no such file. Use 'demo' or a JSON, JSONL or CSV path.")
    served_only = [option for option, value in (("--served-model", args.served_model), ("--api-key-env",
                   args.api_key_env), ("--tokenizer", args.tokenizer), ("--timeout", args.timeout != REQUEST_TIMEOUT_SECONDS),
                   ("--attempts", args.attempts != ATTEMPTS), ("--concurrency", args.concurrency != CONCURRENT_REQUESTS))
                   if value]
    if not args.server and served_only:
        one = len(served_only) == 1
        raise ValueError(f"{', '.join(served_only)} {'goes' if one else 'go'} with --server: add --server URL, or drop "
                         f"{'it' if one else 'them'}.")
    if not 0 < args.timeout <= 3600:
        raise ValueError(f"--timeout must be more than 0 and at most 3600 seconds, not {args.timeout:g}.")
    if not 1 <= args.attempts <= 20:
        raise ValueError(f"--attempts must be from 1 to 20, not {args.attempts}.")
    if args.server and args.model:
        raise ValueError("--model is what this process loads; through --server, name the served model with --served-model.")
    refuse_unused_loading(args, not args.server, "Through --server the server holds the model")
    config = RunConfig(
        task=args.task, method=args.method, dataset=args.dataset, model=args.served_model or args.model or EMBEDDED_MODEL,
        params=parse_params(args.method, args.param), n=args.n, max_new_tokens=args.max_new_tokens,
        batch_size=args.batch_size, seed=args.seed, server=args.server,
    )
    config.samples()  # the dataset and n are checked before the database or the model is touched
    if args.server:
        return _generate_served(args, config)
    loader = model_loader(args)
    loader(config.model)  # a model that cannot load is one error line, before the database is opened
    store = Store(args.db)
    with progress_bar(f"{config.method} {config.task}", "sample") as progress:
        [run_id] = pipeline.generate(store, [config], loader, progress=progress)
    print(run_id)
    return 0


def _generate_served(args, config) -> int:
    """The run through the server at --server: its model checked to be served, and its tokenizer here, before the
    database is opened; what was noticed of the answers said after."""
    import sys
    from dataclasses import replace

    from fwsapp.generation.serving import ServingEngine
    from fwsapp.orchestration import pipeline
    from fwsapp.store import Store

    engine = ServingEngine(args.server, args.api_key_env, args.tokenizer, args.concurrency, args.attempts, args.timeout)
    config = replace(config, model=engine.served_model(args.served_model), tokenizer=args.tokenizer)
    engine.tokenizer(config.model)
    store = Store(args.db)
    try:
        with progress_bar(f"{config.method} {config.task} via {config.model}", "sample") as progress:
            [run_id] = pipeline.generate(store, [config], None, progress=progress, executor=engine)
    finally:
        for note in engine.notes:
            print(f"note: {note}", file=sys.stderr)
    print(run_id)
    return 0
