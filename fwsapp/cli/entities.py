"""`analyze`, `recognize`, `facts`: entropies, disease entities and clinical facts of runs; mentions, clinical facts
and their changes in any texts."""
from __future__ import annotations

import sys

from fwsapp import counted, in_words
from fwsapp.cli.options import command, output_file, recognizer, refuse_unused_loading, target_options
from fwsapp.cli.terminal import opened_targets, model_loader, progress_bar


def register(commands) -> None:
    from fwsapp.entities.introduced import HALLUCINATION_THRESHOLD
    from fwsapp.entities.recognizers import KINDS, default_recognizer, recognizers_of

    analyze = command(commands, cmd_analyze, "analyze", models=True,
        help="the entropy, disease-entity and clinical-fact analyses a run lacks")
    target_options(analyze)
    analyze.add_argument("--entropy-model", help="model for the entropies of imported and served runs (their generator "
                         "is not loaded here; the served model itself, where it loads here); default: skip their entropy")
    analyze.add_argument("--threshold", type=float, default=HALLUCINATION_THRESHOLD,
                         help="hallucination: similarity below this to every reference entity")
    recognizer(analyze)

    # Named as a change of them is (drug, not the registry's chemical), every kind the registry holds.
    changes = [kind.change for kind in KINDS.values()]
    recognize = command(commands, cmd_recognize, "recognize", database=False,
        help=f"{in_words(changes, 'or')} mentions of each text of a JSONL file",
        description='Each input line {"text": ...} gives one output line {"entities": [[start, end, text, value], '
                    '...]} (character offsets; value: the concept the mention is normalised to), in input order.')
    recognize.add_argument("--in", dest="source", required=True, help="JSONL file, one {\"text\": ...} object a line")
    output_file(recognize, "JSONL file to write (only once every line is done)", required=True,
                writes=("recognize writes JSONL", ".jsonl"))
    recognize.add_argument("--kind", choices=list(KINDS), default="disease",
                           help="the kind of mention: " + "; ".join(f"{k.name}: {k.help}" for k in KINDS.values()))
    recognizer(recognize, "the recognizer (default: the kind's first available one)", kind=None, default="")

    facts = command(commands, cmd_facts, "facts", database=False,
        help="clinical facts of each text of a JSONL file, and what changed against another text",
        description='Each input line {"text": T} or {"text": T, "against": A} gives one output line {"facts": [...], '
                    '"changes": [{"kind", "start", "end", "was", "now"}, ...]}, in input order, spans as character '
                    "offsets into T. A fact: kind, start, end, text, value (its concept) and assertion (affirmed, "
                    f"negated or uncertain). A change's kind: {', '.join(changes)}, negation or corruption.")
    facts.add_argument("--in", dest="source", required=True,
                       help='JSONL file, one {"text": ...} or {"text": ..., "against": ...} object a line')
    output_file(facts, "JSONL file to write (only once every line is done)", required=True,
                writes=("facts writes JSONL", ".jsonl"))
    for kind in KINDS:
        facts.add_argument(f"--{kind}-recognizer", choices=recognizers_of(kind), default=default_recognizer(kind),
                           help=f"the recognizer of {kind} facts")


def cmd_analyze(args) -> int:
    from fwsapp.orchestration import pipeline
    from fwsapp.store import generated_here

    store, targets = opened_targets(args)
    here = [generated_here(store.run(run_id)) for run_id in targets]
    if args.entropy_model and all(here):
        raise ValueError("--entropy-model names the model that reads the texts of imported and served runs (their "
                         "generator is not loaded here); a run generated here has its own model's entropies, and every "
                         "one of these runs was: drop it.")
    if not args.entropy_model:
        refuse_unused_loading(args, any(here),
                              "Every one of these runs was imported or served (its generator is not loaded here) "
                              "and no --entropy-model is named")
    with progress_bar("analyze", "sample") as progress:
        analysis = pipeline.analyze(store, targets, model_loader(args), progress, entropy_model=args.entropy_model,
                                    threshold=args.threshold, recognizer=args.recognizer)
    for line in analysis_lines(analysis):
        print(line)
    return 0


def analysis_lines(analysis) -> list[str]:
    """Each run's lines of the entropies, disease entities and clinical facts stored; the grid's analyze step says the
    same."""
    lines = []
    for run_id, computed in analysis.entropies.items():
        lines.append(f"{run_id}: imported or served, so its generator is not loaded here; pass --entropy-model NAME "
                     "for entropies"
                     if computed is None else f"{run_id}: entropies {done(computed, 'text', 'stored')}")
        lines.append(f"{run_id}: disease entities {done(analysis.entities[run_id], 'sample', 'analysed')} "
                     f"({analysis.recognizer})")
        lines.append(f"{run_id}: clinical facts {done(analysis.facts.get(run_id, 0), 'sample', 'stored')}")
    return lines


def done(count: int, unit: str, verb: str) -> str:
    """'of 20 samples stored', or 'already stored' where there was nothing left to do (it said 'of 0 samples')."""
    return f"of {counted(count, unit, unit + 's')} {verb}" if count else f"already {verb}"


def cmd_recognize(args) -> int:
    from fwsapp.entities.recognizers import RECOGNIZERS, check_recognizer, default_recognizer, recognizers_of
    from fwsapp.entities.recognizers.base import recognize_jsonl

    name = args.recognizer or default_recognizer(args.kind)
    if RECOGNIZERS[check_recognizer(name)].kind != args.kind:
        raise ValueError(f"--recognizer {name} finds {RECOGNIZERS[name].kind} mentions, not {args.kind} ones: choose "
                         f"one of {', '.join(recognizers_of(args.kind))}, or leave it out.")
    with progress_bar("recognize", "text") as progress:
        count = recognize_jsonl(args.source, args.out, name, progress, force=args.force,
                                warn=lambda line: print(f"warning: {line}", file=sys.stderr))
    print(f"{args.out}: {args.kind} mentions of {counted(count, 'text', 'texts')} ({name})")
    return 0


def cmd_facts(args) -> int:
    from fwsapp.entities.changes import facts_jsonl
    from fwsapp.entities.facts import FactFinder
    from fwsapp.entities.recognizers import KINDS

    finder = FactFinder({kind: getattr(args, f"{kind}_recognizer") for kind in KINDS})
    with progress_bar("facts", "text") as progress:
        count = facts_jsonl(args.source, args.out, finder, progress, force=args.force,
                            warn=lambda line: print(f"warning: {line}", file=sys.stderr))
    print(f"{args.out}: facts of {counted(count, 'text', 'texts')} ({', '.join(f'{k}: {n}' for k, n in finder.names.items())})")
    return 0
