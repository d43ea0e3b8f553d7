"""`serve-detection`: a watermark's detection served over HTTP, as vLLM's reference detection server answers it."""
from __future__ import annotations

import sys

from fwsapp.cli.options import command, loading_given
from fwsapp.paths import DEFAULT_DB


def register(commands) -> None:
    from fwsapp.service.limits import DEFAULT_RATE_LIMIT
    from fwsapp.watermark.methods import watermark_names

    serve = command(commands, cmd_serve_detection, "serve-detection", models=True, database=False,
        help="serve a watermark's detection over HTTP (POST /detect as vLLM's reference server, /detect/batch)",
        description="An HTTP detection service (FastAPI, uvicorn) for one method and key: POST /detect with "
                    "{\"text\": ...} or {\"token_ids\": [...]} answers score, p_value, num_scored_tokens and "
                    "is_watermarked as vLLM's reference detection server does, plus a three-state verdict and an "
                    "evidence record. The key comes from the environment only: --param key=$VAR. Off loopback it "
                    "needs FWSAPP_ADMIN_TOKEN, which every request then presents as a bearer token.")
    serve.lists_params = True
    serve.add_argument("--method", required=True, help=f"one of {', '.join(watermark_names())}")
    serve.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                       help="the deployment's parameters; its key as key=$VAR, read from that environment variable")
    serve.add_argument("--model", help="the model whose tokenizer detects (and which detects, for a method that reads "
                       "the model), default the embedded one")
    serve.add_argument("--tokenizer", help="mistral-v1, llama-3, a Hugging Face id or a folder (default: the model's)")
    lengths = serve.add_mutually_exclusive_group()
    lengths.add_argument("--lengths-from", metavar="RUN", help="a run of this method with scores by length: a text "
                         "scored on fewer tokens than its answers' median tokens to detect is `too_short` (without it "
                         "or --min-tokens: fewer than 25, a rule of thumb; for a watermark of sentences, fewer than "
                         "can pass its threshold)")
    lengths.add_argument("--min-tokens", type=int, help="or that many scored tokens (sentences, for a watermark of "
                         "sentences), given")
    serve.add_argument("--db", help=f"with --lengths-from: the DuckDB file its run is in (default {DEFAULT_DB})")
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default %(default)s)")
    serve.add_argument("--port", type=int, default=8000, help="(default %(default)s, as vLLM's server)")
    serve.add_argument("--rate-limit", default=DEFAULT_RATE_LIMIT,
                       help="requests each client may send, e.g. 120/second or 1000/minute (default %(default)s)")


def cmd_serve_detection(args) -> int:
    """Everything is checked before a model loads or the port opens: the method, the key's variable, the token off
    loopback, the parameters, the run the lengths come from."""
    from fwsapp.detection.verdicts import MinimumLength, verdict_method
    from fwsapp.human.access import admin_token, serving_problem
    from fwsapp.service.detection import checked_rate
    from fwsapp.watermark.methods import parse_params

    declared = verdict_method(args.method)
    params = parse_params(declared.name, args.param)
    for name in declared.secret_params:
        if not declared.param_specs[name].names_a_variable(params.get(name)):
            raise ValueError(f"serve-detection takes {declared.name}'s {name} from the environment only: set a variable "
                             f"to the deployment's key and give --param {name}=$VARIABLE.")
    token = admin_token()
    problem = serving_problem(args.host, token, "This detection service would be served",
                              "detect with the deployment's key, as often as the rate limit allows",
                              "leave --host out to serve it on 127.0.0.1 only")
    if problem:
        raise ValueError(problem)
    if not 0 < args.port < 65536:
        raise ValueError(f"--port must be between 1 and 65535, not {args.port}.")
    checked_rate(args.rate_limit)
    if args.db and not args.lengths_from:
        raise ValueError("--db names the database --lengths-from reads its run from, and the service reads no other: "
                         "add --lengths-from RUN, or drop --db.")
    if args.min_tokens is not None and args.min_tokens < 0:
        raise ValueError(f"--min-tokens must be 0 or more, not {args.min_tokens}.")
    checked = declared.checked_params(params)
    if not declared.detector_needs_model(checked) and (
            unused := ["--model"] * bool(args.model and args.tokenizer) + loading_given(args)):
        one = len(unused) == 1
        raise ValueError(f"{declared.name}'s detector reads no model, so none is loaded: {' and '.join(unused)} "
                         f"{'is' if one else 'are'} unused (the tokenizer is "
                         f"{'--tokenizer' if args.tokenizer else '--model'}'s): drop {'it' if one else 'them'}.")
    minimum = None  # the method's uncalibrated one (TextDetector)
    if args.min_tokens is not None:
        minimum = MinimumLength(args.min_tokens, "given (--min-tokens)")
    elif args.lengths_from:
        from fwsapp.cli.terminal import existing_store

        minimum = MinimumLength.from_run(existing_store(args.db or DEFAULT_DB), args.lengths_from, declared.name,
                                         checked)
    return serve(build_detector(args, declared, params, minimum), token, args)


def build_detector(args, declared, params: dict, minimum):
    """The detector: the model loaded only for a method that reads it, else its tokenizer alone."""
    from fwsapp.detection.verdicts import TextDetector
    from fwsapp.models import EMBEDDED_MODEL, load_model
    from fwsapp.models.tokenizers import from_huggingface, load_tokenizer

    model = args.model or EMBEDDED_MODEL
    lm = load_model(model, device=args.device, dtype=args.dtype) if declared.detector_needs_model(params) else None
    if args.tokenizer:
        tokenizer = load_tokenizer(args.tokenizer)
    elif lm is not None:
        tokenizer = from_huggingface(lm.name, lm.tokenizer)
    else:
        tokenizer = load_tokenizer(model)
    return TextDetector(declared.name, params, tokenizer, lm=lm, minimum=minimum)


def serve(detector, token: str | None, args) -> int:
    import uvicorn

    from fwsapp.service.detection import create_app

    app = create_app(detector, token, args.rate_limit)
    shown = ", ".join(f"{key}={value}" for key, value in sorted(detector.watermark.recorded_params.items()))
    print(f"Detecting {detector.info.name} ({shown}) with the {detector.tokenizer.name} tokenizer at "
          f"http://{args.host}:{args.port}/detect; too short under {detector.minimum.tokens} scored tokens "
          f"({detector.minimum.basis}); " + ("bearer token required." if token else "no token asked (loopback)."),
          file=sys.stderr, flush=True)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    return 0
