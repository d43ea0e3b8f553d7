"""`score`: the quality metrics a run lacks."""
from __future__ import annotations


from fwsapp.cli.options import command, recognizer, refuse_unused_loading, target_options
from fwsapp.cli.terminal import opened_targets, model_loader, progress_bar


def register(commands) -> None:
    from fwsapp.quality.registry import METRICS, default_metrics

    score = command(commands, cmd_score, "score", models=True, help="compute the quality metrics a run lacks")
    target_options(score)
    score.add_argument("--metrics", nargs="+", default=None, metavar="METRIC", choices=METRICS.names(),
                       help="; ".join(f"{entry.name}: {entry.help}" for entry in METRICS)
                       + f" (default: {' '.join(default_metrics())})")
    score.add_argument("--oracle", help="perplexity model (default: the run's own model; the embedded one for imports)")
    score.add_argument("--alignscore-checkpoint", help="an AlignScore checkpoint; without it the offline stand-in is used")
    recognizer(score, "the disease recognizer of the offline factual-consistency stand-in and of clinical_facts")
    score.set_defaults(recognizer=None)  # the metrics' default, so that one named where no metric reads it is refused


def cmd_score(args) -> int:
    from fwsapp.orchestration import pipeline
    from fwsapp.quality.registry import METRICS, default_metrics

    metrics = args.metrics or default_metrics()
    refuse_unused_loading(args, any("model" in METRICS[name].needs for name in metrics),
                          f"No metric asked for ({', '.join(metrics)}) reads with a language model")
    store, targets = opened_targets(args)
    with progress_bar("score", "sample × metric") as progress:
        counts = pipeline.score(store, targets, model_loader(args), progress, metrics=metrics, oracle=args.oracle,
                                alignscore_checkpoint=args.alignscore_checkpoint, recognizer=args.recognizer)
    for line in scored_lines(counts):
        print(line)
    return 0


def scored_lines(counts: dict) -> list[str]:
    """Each run's line of the values computed and those already stored or skipped; the grid's score step says the
    same."""
    from fwsapp.quality.registry import METRICS
    from fwsapp.quality.scoring import computed_values

    return [f"{run_id}: {computed_values(computed)}" + "".join(f"; {metric} skipped: {METRICS[metric].skipped_because}"
                                                             for metric, count in computed.items() if count is None)
            for run_id, computed in counts.items()]
