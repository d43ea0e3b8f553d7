"""`detect`, `compare`, `paired`: stored texts scored again, by length and in windows; methods at equal strength; two
methods compared text by text."""
from __future__ import annotations

import json

from fwsapp.cli.options import (command, loading_given, output_file, recognizer, refuse_unused_loading, target_options,
                                write_csv)
from fwsapp.results.fws import DEFAULT_ALPHA, DEFAULT_BETA
from fwsapp.cli.terminal import detectable, existing_store, opened_targets, model_loader, progress_bar, table_text


def register(commands) -> None:
    from fwsapp.detection.normalizers import NORMALIZERS
    from fwsapp.watermark.methods import METHODS

    method_names = ", ".join(METHODS.names())
    detect = command(commands, cmd_detect, "detect", models=True,
        help="score a run's stored texts again under any method, parameters and tokenizer",
        description="Re-detect: every stored text of the run (watermarked, unwatermarked, reference) scored as "
                    "MarkLLM's detection scores it. Results are a detection set beside the stored scores.")
    target_options(detect)
    detect.lists_params = True
    detect.add_argument("--method", help=f"one of {method_names}; default: the run's own method")
    detect.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                        help="e.g. rng=cpu, cuda_blocks=492, gamma=0.25, set over the run's own parameters (its key "
                             "among them) where --method is the run's")
    detect.add_argument("--tokenizer", help="mistral-v1, llama-3, a Hugging Face id or a folder "
                        "(default: the one the run's model implies)")
    output_file(detect, "write sample_idx,text,score,num_tokens_scored to this CSV file",
                writes=lambda args: ("--evidence writes JSONL evidence records", ".jsonl") if args.evidence
                else ("detect writes the scores as CSV", ".csv"))
    detect.add_argument("--normalize", choices=NORMALIZERS,
                        help="map each text before tokenising: unicode (NFKC), homoglyphs (look-alikes back to Latin)")
    detect.add_argument("--by-length", action="store_true",
                        help="print tokens to detect and TPR after T tokens under the run's own method (detecting "
                             "again from text only the runs whose scores at every length are not stored)")
    detect.add_argument("--window", type=int, metavar="TOKENS",
                        help="score each text's best window of this many tokens (WinMax), with a threshold calibrated "
                             "for its length: finds a watermarked span pasted into a longer human text")
    detect.add_argument("--predict", action="store_true",
                        help="with --by-length: also predict each watermarked answer's tokens to detect from the run's "
                             "model's next-token distributions (spike entropy, or the chosen token's probability), "
                             "against the measured ones, and the share of answers under 200 tokens detectable")
    detect.add_argument("--fpr", type=float, help="false-positive rate of --by-length's and --window's verdicts "
                        "(default 0.01)")
    detect.add_argument("--deduplicate", action="store_true",
                        help="score each repeated (context, token) pair once, as lm-watermarking's "
                             "ignore_repeated_ngrams: repetitive human text then keeps to the nominal false-positive rate")

    detect.add_argument("--evidence", action="store_true",
                        help="an evidence record per verdict (docs/evidence-record.schema.json): --out gets them as "
                             "JSONL, one per text, instead of the CSV of scores; the terminal gets the verdicts counted")
    detect.add_argument("--audit-keys", type=int, metavar="K",
                        help="false positives under the deployer's key: human texts (the run's references, or "
                             "--corpus) detected under the run's key and K − 1 drawn ones, with and without "
                             "deduplication; per key the FPR at 1 %%, 0.1 %% and 0.01 %% with exact intervals, a "
                             "Kolmogorov–Smirnov test of the p-values, the worst key and the Bonferroni threshold")
    detect.add_argument("--corpus", help="with --audit-keys: a JSONL file of {\"text\": ...} lines (the hospital's own "
                        "notes) instead of the run's references")
    detect.add_argument("--seed", type=int, help="with --audit-keys: seeds the drawn keys (default 0)")

    compare = command(commands, cmd_compare, "compare",
        help="methods at equal strength: each sweep's setting that reaches a target TPR, and quality there",
        description="Runs that differ only in their method's strength parameter (KGW's delta, DiPmark's alpha, "
                    "SynthID's depth; `grid` makes them) form a sweep. For each sweep, the setting that reaches the "
                    "target TPR at the FPR after the given number of tokens, interpolated between swept runs where "
                    "needed, and FWS and disease entities at that setting.")
    strength_options(compare)
    compare.add_argument("--runs", nargs="+", metavar="ID", help="the swept runs (default: every run)")

    paired = command(commands, cmd_paired, "paired",
        help="two methods text by text on the same prompts and seeds: paired differences with 95%% intervals",
        description="Runs of the two methods that differ only in the method, its strength and its threshold (the "
                    "parameters both have, gamma say, set alike) pair seed by seed, and their texts prompt by prompt. "
                    "At equal delta and at equal strength (each method at the value, run on every seed, whose TPR "
                    "after --tokens at --fpr is nearest --target-tpr): disease "
                    "mentions unsupported and introduced per text, the unsupported share, FWS (Auto) and entity "
                    "survival under each attack both sides had; the candidate minus the baseline, with a bootstrap "
                    "interval over prompts, a permutation p-value and the minimum detectable difference.")
    paired.add_argument("--method", required=True, help="the candidate, e.g. EntityKGW")
    paired.add_argument("--against", required=True, help="the baseline, e.g. KGW")
    strength_options(paired)
    paired.add_argument("--alpha", type=float, default=DEFAULT_ALPHA, help="FWS weight of relevance and factual accuracy")
    paired.add_argument("--beta", type=float, default=DEFAULT_BETA, help="FWS weight of coherence")
    recognizer(paired, "whose entity analysis the mention counts read")
    output_file(paired, "also write the table (every digit) to this CSV file", writes=("paired writes its table as CSV", ".csv"))


def strength_options(parser) -> None:
    """What "equal strength" means for `compare` and `paired`: a target TPR at an FPR after a number of tokens."""
    parser.add_argument("--target-tpr", type=float, default=0.9, help="the TPR each method must reach (default %(default)s)")
    parser.add_argument("--fpr", type=float, default=0.01, help="at this false-positive rate (default %(default)s)")
    parser.add_argument("--tokens", type=int, help="T: the TPR after this many tokens (default 64, or shorter where "
                        "the swept runs' answers are)")


def cmd_detect(args) -> int:
    from fwsapp.orchestration import pipeline
    from fwsapp.watermark.methods import parse_params
    from fwsapp.detection.length import DEFAULT_FPR, check_window_size, windowed_rates
    from fwsapp.detection.redetect import set_evidence, set_scores, set_summaries
    from fwsapp.paths import write_output

    # The options first: a refusal after `detectable` came below a line for every run it skips.
    if args.fpr is not None and not (args.by_length or args.window):
        raise ValueError("--fpr sets the false-positive rate of --by-length's and --window's verdicts: add one of them, "
                         "or drop it (a plain detection reports its TPR at 1 % FPR).")
    args.fpr = DEFAULT_FPR if args.fpr is None else args.fpr
    if not 0 < args.fpr < 1:
        raise ValueError(f"--fpr must be in (0, 1), not {args.fpr}.")
    if args.window is not None:
        check_window_size(args.window)
    if args.audit_keys is not None:
        check_audit_options(args)
    else:
        check_detection_options(args)
    store, targets = opened_targets(args)
    if args.all:
        targets = detectable(store, targets, args.tokenizer)
    if args.out and len(targets) != 1:
        raise ValueError("--out writes one run's scores: give a single --run.")
    params = parse_params(args.method or store.run(targets[0])["method"], args.param) if args.param else {}
    if loading_given(args) and targets and not args.predict:
        named = ", ".join(sorted({args.method or store.run(run_id)["method"] for run_id in targets}))
        refuse_unused_loading(args, pipeline.detection_reads_model(store, targets, args.method, params),
                              f"{named}'s detector reads no model")
    if args.audit_keys is not None:
        return print_key_audit(store, targets, args, params)
    if args.by_length:
        return print_lengths(store, targets, args)
    with progress_bar("detect", "text") as progress:
        sets = pipeline.detect(store, targets, model_loader(args), progress, method=args.method, params=params,
                               tokenizer=args.tokenizer, normalize=args.normalize, window=args.window,
                               deduplicate=args.deduplicate)
    summaries = {summary["set_id"]: summary for found in set_summaries(store, [entry.run_id for entry in sets]).values()
                 for summary in found}
    for entry in sets:
        print(f"{entry.run_id}: detection set {entry.set_id} ({entry.method}, {entry.tokenizer}"
              + (", each (context, token) pair once)" if args.deduplicate else ")"))
        print("  " + set_line(summaries[entry.set_id]))
        if args.window:
            print("  " + windowed_rates(store, entry.set_id, entry.method, args.window, args.fpr))
        if args.evidence:
            print("  " + verdict_counts(set_evidence(store, entry.set_id)))
    if args.out and args.evidence:
        write_output(args.out, "".join(json.dumps(record) + "\n" for record in set_evidence(store, sets[0].set_id))
                     .encode(), args.force)
        print(args.out)
    elif args.out:
        write_csv(args, set_scores(store, sets[0].set_id))
        print(args.out)
    return 0


def check_audit_options(args) -> None:
    if args.all or len(args.run) != 1 or args.window or args.by_length or args.predict or args.normalize or args.out \
            or args.deduplicate or args.evidence:
        raise ValueError("--audit-keys audits one run's method and key (with and without deduplication): give a single "
                         "--run, and drop --window, --by-length, --predict, --normalize, --deduplicate, --evidence and "
                         "--out.")


def check_detection_options(args) -> None:
    """The options of a detection or a reading by length that do not go together."""
    if args.corpus:
        raise ValueError("--corpus is the human text of --audit-keys: add --audit-keys K, or drop it.")
    if args.seed is not None:
        raise ValueError("--seed seeds the keys --audit-keys draws: add --audit-keys K, or drop it.")
    if args.evidence and (args.window or args.by_length):
        raise ValueError("--evidence records whole texts' verdicts: drop --window (WinMax's verdict has no evidence "
                         "record) and --by-length.")
    if args.predict and not args.by_length:
        raise ValueError("--predict compares predicted with measured tokens to detect: add --by-length.")
    if args.by_length and (args.method or args.param or args.normalize or args.window or args.out or args.deduplicate):
        raise ValueError("--by-length reads each run under its own method and parameters: drop --method, --param, "
                         "--normalize, --window, --deduplicate and --out.")


def detection_phrase(auroc: float | None, tpr_at_fpr: dict | None, against: str) -> str | None:
    """'AUROC 0.997, TPR at 1% FPR 0.93 against {against}' (without the TPR where the negatives are too few to
    resolve 1 %); None without an AUROC."""
    if auroc is None:
        return None
    tpr = (tpr_at_fpr or {}).get("0.01")
    return (f"AUROC {auroc:.3f}, TPR at 1% FPR {tpr:.2f} against {against}" if tpr is not None
            else f"AUROC {auroc:.3f} against {against} (too few for a TPR at 1% FPR)")


def set_line(summary: dict) -> str:
    """What a detection set found: AUROC and TPR at 1 % FPR against the run's negatives, and for an import how
    closely it reproduces the stored scores ("detect" printed the set's id alone), and what to do where it does not."""
    from fwsapp.detection.redetect import NOT_REPRODUCED_HINT, reproduction

    found = detection_phrase(summary["auroc"], summary["tpr_at_fpr"], f"the {summary['negatives']} texts") or \
        f"no AUROC: no watermarked or no {summary['negatives']} text was scored"
    found += f"; {summary['texts_scored']} texts scored"
    if agreement := summary["agreement"]:
        # Under settings of one's own choosing, other scores are expected; under the run's, the run is wrong.
        found += "; " + reproduction(agreement) + (f": {NOT_REPRODUCED_HINT}"
                                                   if agreement["differing"] and summary["run_settings"] else "")
    return found


def verdict_counts(records: list[dict]) -> str:
    """How many texts of each kind got each verdict, and the minimum length they were read against."""
    import pandas as pd

    from fwsapp import units
    from fwsapp.watermark import methods

    if not records:
        return "no text scored"
    counts = pd.DataFrame([{"kind": record["text_kind"], "verdict": record["evidence"]["verdict"]} for record in records])
    table = counts.value_counts().unstack(fill_value=0)
    minimum = records[0]["evidence"]["min_tokens"]
    unit = methods.info(records[0]["evidence"]["algorithm"]).unit
    return ("; ".join(f"{kind}: " + ", ".join(f"{count} {verdict}" for verdict, count in row.items() if count)
                      for kind, row in table.iterrows())
            + f" (too short: under {units(minimum['tokens'], unit, 'scored')}, "
              f"{minimum['basis']})")


def print_key_audit(store, targets: list[str], args, params: dict) -> int:
    """`detect --audit-keys K`: one run's method and key (`params` set over the run's) over human text (its
    references, or --corpus)."""
    from fwsapp.entities.recognizers.base import read_records_jsonl
    from fwsapp.orchestration import pipeline

    run_id = targets[0]
    method = args.method or store.run(run_id)["method"]
    corpus = [line["text"] for line in read_records_jsonl(args.corpus)] if args.corpus else None
    found = pipeline.audit_keys(store, run_id, model_loader(args), args.audit_keys, args.seed or 0, method=method,
                                params=params, tokenizer=args.tokenizer, corpus=corpus)
    print(f"{found.method}: {found.texts} human texts ({args.corpus or f'the references of {run_id}'}, "
          f"{found.tokenizer}) under "
          f"{args.audit_keys} keys")
    print(table_text(found.written()))
    print("\n".join(found.summary()))
    return 0


def print_lengths(store, targets: list[str], args) -> int:
    from fwsapp.orchestration import pipeline
    from fwsapp.detection.length import length_summary, run_curves

    if args.predict:  # checked before any scoring
        from fwsapp.detection.predicted_length import run_prediction_problem

        for run_id in targets:
            run = store.run(run_id)
            if problem := run_prediction_problem(run):
                raise ValueError(f"Run {run_id}: {problem}")
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
            print(f"  {size:>6} {row['n']:>6} {_rate(row['tpr'], row['n']):>6} {row['negatives']:>14} "
                  f"{_rate(row['fpr'], row['negatives']):>6}")
    if args.predict:
        print_predictions(store, targets, args)
    return 0


def print_predictions(store, targets: list[str], args) -> None:
    from fwsapp.detection.predicted_length import prediction_table
    from fwsapp import percent
    from fwsapp.orchestration import pipeline

    with progress_bar("predict from entropy", "answer") as progress:
        pipeline.predict_lengths(store, targets, model_loader(args), progress)
    table = prediction_table(store, targets, args.fpr)
    print(f"\nTokens to detect predicted from entropy against measured (verdicts at {percent(args.fpr)} FPR; medians over "
          "each run's watermarked answers; detectable: the share of answers under 200 tokens detected by their end)")
    print(table_text(table, float_format=lambda value: f"{value:.2f}"))


def _tokens(value) -> str:
    return "–" if value is None else value if isinstance(value, str) else f"{value:g}"


def _rate(value, n: int) -> str:
    """A rate as the Length tab and the report show it (`sample_size.shown`: too few texts say so, in its words), to
    three decimals."""
    from fwsapp.sample_size import shown

    written = shown(value, "rate", n)
    return f"{written:.3f}" if isinstance(written, float) else written


def cmd_compare(args) -> int:
    from fwsapp.results.report import build_report
    from fwsapp.data.tasks import tasks_named
    from fwsapp import percent
    from fwsapp.detection.strength import (QUALITY, check_target, default_tokens, equal_strength, headings,
                                           no_tpr_reason, reached_tokens)

    check_target(args.target_tpr, args.fpr, args.tokens)
    store = existing_store(args.db)
    if args.runs:
        for run_id in args.runs:
            store.run(run_id)
    reached = reached_tokens(store, args.runs)
    args.tokens = default_tokens(reached) if args.tokens is None else args.tokens
    points, table = equal_strength(store, build_report(store), args.target_tpr, args.fpr, args.tokens, args.runs)
    if points.empty:
        print("No sweep to compare: compare needs runs with scores by length (`detect --by-length`) whose methods "
              "have a strength parameter; `grid experiments/strength.toml` makes such a sweep.")
        return 1
    print(f"Equal strength: TPR {args.target_tpr:g} at {percent(args.fpr)} FPR after {args.tokens} tokens")
    named = headings(args.fpr, args.tokens)
    measured = bool((table.runs > 0).any())
    if not measured:
        print(no_tpr_reason(reached, args.tokens))
    else:
        shown = table[["method", "model", "task", "strength", "value", "setting", *QUALITY]]
        print(table_text(tasks_named(shown).rename(columns=named), float_format=lambda value: f"{value:.3g}"))
    print("\nSwept runs:")
    swept = points[["method", "task", "strength", "value", "tpr", "basis", "run_id"]]
    print(table_text(tasks_named(swept).rename(columns=named), float_format=lambda value: f"{value:.3g}"))
    return 0 if measured else 1


def cmd_paired(args) -> int:
    from fwsapp.results.fws import check_weights
    from fwsapp import percent
    from fwsapp.detection.strength import check_target, default_tokens, reached_tokens
    from fwsapp.results.paired import EQUAL_STRENGTH, comparison_table, no_equal_strength, unpaired_reason, written

    check_weights(args.alpha, args.beta)  # before the database is looked for
    check_target(args.target_tpr, args.fpr, args.tokens)
    store = existing_store(args.db)
    args.tokens = default_tokens(reached_tokens(store)) if args.tokens is None else args.tokens
    table = comparison_table(store, args.method, args.against, args.target_tpr, args.fpr, args.tokens,
                             args.recognizer, args.alpha, args.beta)
    if table.empty:
        print(unpaired_reason(store, args.method, args.against, args.target_tpr, args.fpr, args.tokens))
        return 1
    if args.out:
        write_csv(args, table)
    print(f"{args.method} (candidate) against {args.against} (baseline), texts paired by prompt and seed; difference = "
          "candidate − baseline, 95% interval from a bootstrap over prompts (n: the prompts that carry the measure; for a "
          "share, those with a mention on the side with fewer), detectable = the difference a two-sided test finds "
          f"with 80% power; equal strength: TPR {args.target_tpr:g} at {percent(args.fpr)} FPR after {args.tokens} tokens")
    for setting, rows in written(table).groupby("setting", sort=False):
        print(f"\n{setting}:")
        print(table_text(rows.drop(columns="setting")))
    if EQUAL_STRENGTH not in set(table.setting):
        print(f"\n{no_equal_strength(store, args.method, args.against, args.tokens)}")
    return 0
