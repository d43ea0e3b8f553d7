"""`analyze`, `recognize`: entropies and disease entities of runs, and disease mentions of any texts."""
from __future__ import annotations

import sys

from fwsapp.cli.options import command, output_file, recognizer, target_options
from fwsapp.cli.terminal import opened_targets, model_loader, progress_bar


def register(commands) -> None:
    from fwsapp.entities.introduced import HALLUCINATION_THRESHOLD

    analyze = command(commands, cmd_analyze, "analyze", models=True,
        help="entropy and disease-entity analyses a run lacks")
    target_options(analyze)
    analyze.add_argument("--entropy-model", help="model for imported runs' entropies (their generator is not loaded); "
                         "default: skip entropy for imported runs")
    analyze.add_argument("--threshold", type=float, default=HALLUCINATION_THRESHOLD,
                         help="hallucination: similarity below this to every reference entity")
    recognizer(analyze)

    recognize = command(commands, cmd_recognize, "recognize", database=False,
        help="disease mentions of each text of a JSONL file",
        description='Each input line {"text": ...} gives one output line {"entities": [[start, end, text], ...]} '
                    "(character offsets), in input order.")
    recognize.add_argument("--in", dest="source", required=True, help="JSONL file, one {\"text\": ...} object a line")
    output_file(recognize, "JSONL file to write (only once every line is done)", required=True)
    recognizer(recognize)


def cmd_analyze(args) -> int:
    from fwsapp.orchestration import pipeline

    store, targets = opened_targets(args)
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


def cmd_recognize(args) -> int:
    from fwsapp.entities.recognizers import check_recognizer
    from fwsapp.entities.recognizers.base import recognize_jsonl

    check_recognizer(args.recognizer)
    with progress_bar("recognize", "text") as progress:
        count = recognize_jsonl(args.source, args.out, args.recognizer, progress, force=args.force,
                                warn=lambda line: print(f"warning: {line}", file=sys.stderr))
    print(f"{args.out}: disease mentions of {count} texts ({args.recognizer})")
    return 0
