"""Removal and forgery (issue 49): what a watermark buys against a determined adversary, for medical answers.

Run: .venv/bin/python -m bench.forgery [--tasks qa completion summarization] [--n 48] [--semantic-n 8]
     [--new-tokens 64] [--observed 16 32] [--forgeries 16] [--long-n 16] [--long-tokens 192]
     [--scale-n 400] [--scale-methods "KGW (1-token context)" ...] [--scale-observed 25 100 300]
     [--scale-forgeries 32] [--paraphrase-tasks qa] [--db cache/bench-forgery.duckdb]
     [--only table|scale]

1. On each task (../shared/data, seed 0) the embedded model answers with KGW (one-token context), KGW with a four-token
   context, SynthID and EntityKGW (n prompts each), and with SemStamp and k-SemStamp (semantic-n prompts: each answer
   is sentence-level rejection sampling). Every run is detected clean and after synonym substitution (ratio 0.5); each
   token-level run is spoofed by watermark stealing from `observed` of its answers, the forger (the embedded model,
   strength 4) answering `forgeries` prompts it never saw. The table gives, per task and method: AUROC and TPR at 5 %
   FPR clean and after synonyms, the forgery success at the method's threshold and at 5 % FPR against the run's
   negatives, the forgeries' similarity to the model's own answers, and the seconds and rejections per answer.
2. SemStamp and k-SemStamp on long QA answers (long-n prompts, long-tokens new tokens): AUROC over the texts of at least
   8 sentences, clean and after synonyms.
3. Forgery against the number of observed answers: each of scale-methods on scale-n completion prompts, spoofed from
   each of scale-observed answers, scale-forgeries forged answers each, seeds 0 and 1 (each draws its own split).
Everything goes through fwsapp's pipeline into one resumable database.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DATA = ROOT.parent / "shared" / "data"
DATASETS = {"qa": "healthqa_qa.json", "completion": "healthqa_completion.json", "summarization": "meqsum_summarization.json"}
TOKEN_LEVEL = {"KGW (1-token context)": ("KGW", {}), "KGW (4-token context)": ("KGW", {"prefix_length": 4}),
               "SynthID": ("SynthID", {}), "EntityKGW": ("EntityKGW", {}), "vLLM-Gumbel": ("vLLM-Gumbel", {})}
SEMANTIC = {"SemStamp": ("SemStamp", {}), "k-SemStamp": ("k-SemStamp", {})}
LONG_SENTENCES = 8
METRICS = ("simcse", "simcse_reference", "rouge", "f1", "factuality")  # FWS (Auto)'s, as the EntityKGW benches score


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", nargs="+", default=list(DATASETS), choices=list(DATASETS))
    parser.add_argument("--n", type=int, default=48)
    parser.add_argument("--semantic-n", type=int, default=8)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--observed", type=int, nargs="+", default=[16, 32])
    parser.add_argument("--forgeries", type=int, default=16)
    parser.add_argument("--long-n", type=int, default=16)
    parser.add_argument("--long-tokens", type=int, default=192)
    parser.add_argument("--paraphrase-tasks", nargs="*", default=["qa"], choices=list(DATASETS))
    parser.add_argument("--scale-n", type=int, default=400)
    parser.add_argument("--scale-methods", nargs="+", default=["KGW (1-token context)"],
                        choices=[label for label in TOKEN_LEVEL if stealable(label)])
    parser.add_argument("--scale-observed", type=int, nargs="+", default=[25, 100, 300])
    parser.add_argument("--scale-forgeries", type=int, default=32)
    parser.add_argument("--db", default=str(ROOT / "cache" / "bench-forgery.duckdb"))
    parser.add_argument("--only", choices=("table", "scale"), help="scale: step 3 alone")
    args = parser.parse_args()

    from fwsapp.generation.run_config import RunConfig
    from fwsapp.store import Store

    def config(task: str, label: str, n: int, tokens: int) -> RunConfig:
        method, params = {**TOKEN_LEVEL, **SEMANTIC}[label]
        return RunConfig(task=task, dataset=str(DATA / DATASETS[task]), method=method, params=params, n=n,
                         max_new_tokens=tokens, batch_size=16, seed=0)

    store = Store(args.db)
    runs = {(task, label): config(task, label, args.semantic_n if label in SEMANTIC else args.n, args.new_tokens)
            for task in args.tasks for label in {**TOKEN_LEVEL, **SEMANTIC}}
    long_runs = {("qa", label): config("qa", label, args.long_n, args.long_tokens) for label in SEMANTIC}
    scale_runs = {label: config("completion", label, args.scale_n, args.new_tokens) for label in args.scale_methods}
    scale_params = [({"observed": observed, "forgeries": args.scale_forgeries}, seed)
                    for observed in args.scale_observed for seed in (0, 1)]
    if args.only != "table":
        from fwsapp.models import load_model
        from fwsapp.models.threads import adapt
        from fwsapp.orchestration import pipeline

        lm = load_model()
        adapt()
        for (task, label), run in [*runs.items(), *long_runs.items()] if args.only != "scale" else []:
            pipeline.generate(store, [run], lambda name: lm)
            pipeline.attack(store, [run.run_id()], lambda name: lm, attack="synonym", params={"ratio": 0.5})
            pipeline.score(store, [run.run_id()], lambda name: lm, metrics=METRICS)
            if task in args.paraphrase_tasks:
                pipeline.attack(store, [run.run_id()], lambda name: lm, attack="paraphrase",
                                params={"backend": "local", "max_tokens": 2 * run.max_new_tokens})
            if stealable(label):
                for observed in args.observed:
                    pipeline.attack(store, [run.run_id()], lambda name: lm, attack="spoofing",
                                    params={"observed": observed, "forgeries": args.forgeries})
            print(f"{task} · {label} · n={run.n} · {run.max_new_tokens} tokens: done", flush=True)
        for label, scale_run in scale_runs.items():
            pipeline.generate(store, [scale_run], lambda name: lm)
            for params, seed in scale_params:
                pipeline.attack(store, [scale_run.run_id()], lambda name: lm, attack="spoofing", params=params, seed=seed)
            print(f"completion · {label} · n={scale_run.n}: forgeries done", flush=True)
    print(table(store, {key: run.run_id() for key, run in runs.items()}, args.observed))
    print()
    print(long_table(store, {key: run.run_id() for key, run in long_runs.items()}))
    print()
    print(scale_table(store, {label: run.run_id() for label, run in scale_runs.items()}))


def scale_table(store, runs: dict[str, str]) -> str:
    """Forgery success against the observed answers, per method, each split seed a row."""
    from fwsapp.robustness.attack_sets import summaries

    rows = ["| method | observed answers | split seed | forged answers | called watermarked (at its threshold) | "
            "at 1 % FPR | at 5 % FPR | AUROC against the negatives | similarity to the model's own answer |",
            "|---" * 9 + "|"]
    for label, run_id in runs.items():
        found = sorted((row for row in summaries(store, [run_id]) if row["attack"] == "spoofing"),
                       key=lambda row: (row["params"]["observed"], row["seed"]))
        for row in found:
            rates = row["tpr_at_fpr"] or {}
            shown = [f"{rates[key]:.2f}" if rates.get(key) is not None else "–" for key in ("0.01", "0.05")]
            rows.append(f"| {label} | {row['params']['observed']} | {row['seed']} | {row['texts']} | "
                        f"{row['still_detected']:.2f} | {shown[0]} | {shown[1]} | {row['auroc']:.3f} | "
                        f"{row['similarity']:.2f} |")
    return "\n".join(rows)


def stealable(label: str) -> bool:
    """Whether the method has a green list seeded by the tokens before each position, which spoofing learns."""
    from fwsapp.watermark.methods import info

    return info({**TOKEN_LEVEL, **SEMANTIC}[label][0]).seeding_context is not None


def long_table(store, runs: dict[tuple[str, str], str]) -> str:
    """AUROC of the semantic watermarks over the texts of at least LONG_SENTENCES sentences, clean and after synonyms."""
    from fwsapp.detection.roc import summary
    from fwsapp.watermark.semantic import sentence_spans

    rows = [f"| method | answers | of them ≥ {LONG_SENTENCES} sentences | sentences (median) | AUROC clean | "
            "AUROC after synonyms or a paraphrase | s per answer | rejections per answer |", "|---" * 8 + "|"]
    for (_, label), run_id in runs.items():
        generations = store.generations(run_id)
        if generations.empty:
            continue
        sentences = {kind: {row.sample_idx: len(sentence_spans(text)) for row in generations.itertuples()
                            for text in [getattr(row, f"{kind}_text")]} for kind in ("watermarked", "unwatermarked")}
        long_enough = {kind: {index for index, count in counts.items() if count >= LONG_SENTENCES}
                       for kind, counts in sentences.items()}
        clean_set = store.detection_sets([run_id]).set_id
        attacked = store.detection_sets([run_id], attacked=True)
        attacks = store.attack_sets([run_id]).set_index("attack_set_id").attack
        scores = store.redetections(list(attacked.set_id) + list(clean_set))
        clean = scores[scores.set_id.isin(clean_set)]
        negatives = clean[(clean.text_kind == "unwatermarked") & clean.sample_idx.isin(long_enough["unwatermarked"])].score

        def auroc(positives) -> str:
            chosen = positives[positives.sample_idx.isin(long_enough["watermarked"])].score
            return f"{summary(chosen, negatives, 'higher')['auroc']:.3f}" if len(chosen) and len(negatives) else "–"

        aurocs = [auroc(clean[clean.text_kind == "watermarked"]),
                  ", ".join(f"{attacks[entry.attack_set_id]} {auroc(scores[scores.set_id == entry.set_id])}"
                            for entry in attacked.itertuples())]
        rows.append(f"| {label} | {len(generations)} | {len(long_enough['watermarked'])} watermarked, "
                    f"{len(long_enough['unwatermarked'])} unwatermarked | "
                    f"{sorted(sentences['watermarked'].values())[len(generations) // 2]} | {aurocs[0]} | {aurocs[1]} | "
                    f"{generations.watermarked_seconds.mean():.1f} | {generations.watermarked_rejections.mean():.1f} |")
    return "\n".join(rows)


def table(store, runs: dict[tuple[str, str], str], observed: list[int]) -> str:
    """The markdown table of removal and forgery, one row per task and method."""
    import pandas as pd

    from fwsapp.results.paired import text_measures
    from fwsapp.robustness.attack_sets import summaries

    rows = ["| task | method | texts | AUROC clean | TPR @5 % clean | AUROC synonym 0.5 | TPR @5 % synonym | "
            "AUROC paraphrase | TPR @5 % paraphrase | "
            + " | ".join(f"forged @threshold / @5 % FPR, {count} observed" for count in observed)
            + " | forgeries' similarity | FWS (Auto) | disease names kept by synonyms | s per answer | "
              "rejections per answer |", "|---" * (14 + len(observed)) + "|"]
    for (task, label), run_id in runs.items():
        found = summaries(store, [run_id])
        if not found:
            continue
        clean = next(row for row in found if row["attack"] is None)
        synonym = next((row for row in found if row["attack"] == "synonym"), None)
        forged = {row["params"]["observed"]: row for row in found if row["attack"] == "spoofing"}
        generations = store.generations(run_id)
        rejections = pd.to_numeric(generations.watermarked_rejections, errors="coerce").mean()

        def tpr(row):
            return f"{row['tpr_at_fpr']['0.05']:.2f}" if row and row["tpr_at_fpr"] and row["tpr_at_fpr"].get("0.05") \
                is not None else "–"

        cells = [task, label, str(clean["texts"]), f"{clean['auroc']:.3f}", tpr(clean),
                 f"{synonym['auroc']:.3f}" if synonym else "–", tpr(synonym)]
        paraphrase = next((row for row in found if row["attack"] == "paraphrase"), None)
        cells += [f"{paraphrase['auroc']:.3f}" if paraphrase else "–", tpr(paraphrase)]
        cells += [f"{forged[count]['still_detected']:.2f} / {tpr(forged[count])}" if count in forged else "–"
                  if stealable(label) else "n/a (no seeded list)" for count in observed]
        similarity = [row["similarity"] for row in forged.values() if row["similarity"] is not None]
        measures = text_measures(store, [run_id])
        auto = measures[measures.measure == "FWS (Auto)"].value
        cells += [f"{sum(similarity) / len(similarity):.2f}" if similarity else "–",
                  f"{auto.mean():.3f}" if len(auto) else "–",
                  f"{synonym['entity_survival']:.2f}" if synonym and synonym["entity_survival"] is not None else "–",
                  f"{generations.watermarked_seconds.mean():.1f}",
                  "–" if pd.isna(rejections) else f"{rejections:.1f}"]
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


if __name__ == "__main__":
    main()
