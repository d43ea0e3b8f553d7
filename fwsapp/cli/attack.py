"""`attack`: a run's watermarked texts attacked, then detected again."""
from __future__ import annotations

import argparse
import sys

from fwsapp.cli.options import command, loading_given, refuse_unused_loading, target_options
from fwsapp.cli.terminal import detectable, opened_targets, model_loader, progress_bar


def register(commands) -> None:
    from fwsapp.detection.normalizers import NORMALIZERS
    from fwsapp.robustness.attacks import ATTACKS, DEFAULT_SEED, attacks_help

    attack = command(commands, cmd_attack, "attack", models=True,
        help="attack a run's watermarked texts, then detect them again; prints the attack and detection sets and "
             "what the attack did",
        description="Robustness: each watermarked text edited by one attack (its parameters and seed), stored beside "
                    "the generations, then scored with the run's method and tokenizer. Rerunning computes nothing; an "
                    "interrupted attack resumes.",
        epilog=attacks_help(), formatter_class=argparse.RawDescriptionHelpFormatter)
    target_options(attack)
    attack.add_argument("--attack", required=True, choices=ATTACKS.names(), help="the attack (listed below)")
    attack.add_argument("--param", action="append", default=[], metavar="KEY=VALUE", help="an attack parameter")
    attack.add_argument("--seed", type=int, default=DEFAULT_SEED, help="draws the edits (default %(default)s)")
    attack.add_argument("--tokenizer", help="as for detect (default: the one the run's model implies)")
    attack.add_argument("--normalize", choices=NORMALIZERS, help="as for detect: the defence against homoglyphs")


def cmd_attack(args) -> int:
    from fwsapp.orchestration import pipeline
    from fwsapp.plugins import checked_seed
    from fwsapp.results.run_names import ready
    from fwsapp.robustness.attack_sets import check_attack_params
    from fwsapp.watermark.methods import info, split_pair

    # The options first: a refusal after the runs are read came below a line for every run --all skips.
    params = dict(split_pair(pair) for pair in args.param)
    checked_seed(args.seed)
    entry, checked = check_attack_params(args.attack, params)
    store, targets = opened_targets(args)
    if args.all:  # every run that has watermarked texts to attack; the others are named, not a reason to stop
        runs = ready(store.runs())
        attackable = [run_id for run_id, method in zip(runs.run_id, runs.method)
                      if run_id in targets and not info(method).post_hoc]
        for run_id in sorted(set(targets) - set(attackable)):
            print(f"{run_id}: skipped (no watermarked texts yet, still generating, or a post-hoc detector)",
                  file=sys.stderr)
        targets = detectable(store, attackable, args.tokenizer)
    if loading_given(args) and targets and not entry.reads_model(checked):
        named = ", ".join(sorted({store.run(run_id)["method"] for run_id in targets}))
        refuse_unused_loading(args, pipeline.detection_reads_model(store, targets),
                              f"{args.attack} reads no model, nor does {named}'s detector")
    with progress_bar(f"attack {args.attack}", "text") as progress:
        sets = pipeline.attack(store, targets, model_loader(args), progress, attack=args.attack, params=params,
                               seed=args.seed, tokenizer=args.tokenizer, normalize=args.normalize)
    for line in attacked_lines(store, sets):
        print(line)
    return 0


def attacked_lines(store, sets) -> list[str]:
    """Each attack set's lines: its run, the attack and detection sets, and what the attack did (`attack_line`); the
    grid's attack steps say the same."""
    from fwsapp.robustness.attack_sets import summaries

    found = {row["set_id"]: row for row in summaries(store, sorted({entry.run_id for entry in sets}))
             if row["attack"] is not None}
    return [line for entry in sets if entry.attack_set for line in (
        f"{entry.run_id}: attack set {entry.attack_set}, detection set {entry.set_id} ({entry.method}, {entry.tokenizer})",
        "  " + attack_line(found[entry.set_id]))]


def attack_line(row: dict) -> str:
    """What an attack set did, in the Robustness page's terms: the share the method still calls watermarked (for a
    forgery, the share of forged answers it attributes to the watermark), TPR at 1 % FPR and AUROC against the clean
    negatives, the words changed and the mentions kept ("attack" printed the sets' ids alone)."""
    from fwsapp.cli.detect import detection_phrase
    from fwsapp import share_text
    from fwsapp.robustness.attacks import ATTACKS

    entry = ATTACKS[row["attack"]]
    shares = (f"{'forged answers called watermarked' if entry.forges else 'still called watermarked'} "
              f"{share_text(row['still_detected'])} of {row['texts']}")
    if detection := detection_phrase(row["auroc"], row["tpr_at_fpr"],
                                     f"the {row['negative_texts']} clean {row['negatives']} texts"):
        shares += f"; {detection}"
    if row["words_changed"] is not None and not entry.forges:
        shares += f"; words changed {share_text(row['words_changed'])}"
    if row["mentions"]:
        shares += f"; {entry.fact} mentions kept {row['mentions_kept']} of {row['mentions']}"
    elif row["mentions"] == 0 and entry.edits == "mentions":
        shares += f"; no {entry.fact} mention in any text, so it changed nothing"
    if row.get("baseline_note"):  # figures read against other green lists than the run's, or other ids
        shares += f"; {row['baseline_note']}"
    return shares
