"""`study`: a clinician study served to a team."""
from __future__ import annotations

import shlex
import sys

from fwsapp import counted
from fwsapp.cli.options import command, db, output_file, subcommand
from fwsapp.cli.terminal import deletion_confirmed, existing_store, table_text


def register(commands) -> None:
    from fwsapp.human.access import DEFAULT_APP_ADDRESS

    study_command = command(commands, cmd_study, "study", database=False,
        help="a clinician study served to a team: create it, invite or revoke raters, follow it, export it, delete it")
    actions = study_command.add_subparsers(dest="action", required=True, metavar="ACTION")
    create = subcommand(actions, "create", help="draw a study's items from runs and print each rater's invite link")
    create.add_argument("--name", required=True, help="the study's name, as `status` and `export` take it")
    create.add_argument("--runs", nargs="+", required=True, metavar="ID", help="the runs whose samples are rated")
    items = create.add_mutually_exclusive_group()
    items.add_argument("--share", type=float, default=0.10, help="share of each run's samples to rate (default 0.10)")
    items.add_argument("--items-per-run", type=int, help="how many samples of each run to rate")
    create.add_argument("--raters-per-item", type=int, default=3, help="raters asked to rate each item (default 3)")
    create.add_argument("--attention", type=float, default=0.10, help="share of each rater's items shown twice, A and B "
                        "swapped, as attention checks (default 0.10)")
    create.add_argument("--entities", action="store_true", help="also ask for verdicts on each answer's disease names")
    create.add_argument("--seed", type=int, default=0, help="seeds which samples are drawn (default 0)")
    create.add_argument("--rater", action="append", default=[], metavar="NAME",
                        help="invite a rater (repeatable); the name is for the researcher only")
    invite = subcommand(actions, "invite", help="invite raters to a study and print their links")
    invite.add_argument("--study", required=True, help="its name or id")
    invite.add_argument("--rater", action="append", required=True, metavar="NAME",
                        help="a rater to invite (repeatable); the name is for the researcher only")
    for action in (create, invite):
        action.add_argument("--url", default=DEFAULT_APP_ADDRESS, help="where raters reach the app")
    revoke = subcommand(actions, "revoke", help="revoke a rater's link at once; their ratings stay")
    revoke.add_argument("--rater", required=True, metavar="RATER_ID", help="the rater's id, as `status` lists it")
    status = subcommand(actions, "status", help="progress per rater, attention consistency, disagreements")
    status.add_argument("--study", required=True, help="its name or id")
    export_study = subcommand(actions, "export", help="the study's ratings by rater id (no names, no tokens)")
    export_study.add_argument("--study", required=True, help="its name or id")
    output_file(export_study, "a .csv or .parquet file (with an Entities task, the verdicts go beside it: "
                "NAME.entities.csv)", required=True)
    delete = subcommand(actions, "delete", help="delete a study with its raters' links and ratings (asks first); "
                        "its runs stay")
    delete.add_argument("--study", required=True, help="its name or id")
    delete.add_argument("--yes", action="store_true", help="do not ask")
    for action in (create, invite, revoke, status, export_study, delete):
        db(action)


def cmd_study(args) -> int:
    from fwsapp.human import study
    from fwsapp.human.access import app_address, invite_link

    if args.action in ("create", "invite"):
        try:
            app_address(args.url)
        except ValueError as error:
            raise ValueError(f"--url: {error}") from None
    store = existing_store(args.db)  # a study is of runs already stored
    if args.action == "create":
        chosen, invites = study.create(store, args.name, args.runs, args.share, args.items_per_run,
                                       args.raters_per_item, args.attention, args.entities, args.seed, args.rater)
        print(f"{chosen.study_id}: {counted(len(store.study_items(chosen.study_id)), 'item', 'items')}")
    elif args.action == "invite":
        chosen = study.study(store, args.study)
        invites = study.invite(store, chosen, args.rater)
    elif args.action == "revoke":
        unrated = study.revoke(store, args.rater)
        print(f"{args.rater}: revoked; {unrated} unrated items go to the raters you invite next")
        return 0
    elif args.action == "status":
        chosen = study.study(store, args.study)
        print(f"{chosen.name}: {chosen.describe()}\n")
        progress = study.rater_progress(store, chosen)
        print(table_text(progress) if not progress.empty else
              f"No rater yet: `python -m fwsapp study invite --study {shlex.quote(chosen.name)} --rater NAME` makes "
              "their links.")
        disagreements = study.disagreements(study.ratings(store, chosen))
        print(f"\n{counted(len(disagreements), 'aspect', 'aspects')} of texts whose raters are {study.DISAGREEMENT}+ points apart")
        if short := study.short_of_raters(store, chosen):
            print(short)
        return 0
    elif args.action == "delete":
        chosen = study.study(store, args.study)
        if not deletion_confirmed(f"study delete --study {args.study}", study.deletion_question(store, chosen),
                                  chosen.name, args.yes):
            return 1
        deleted = study.delete(store, chosen)
        print(f"Deleted the study {chosen.name!r}: " + ", ".join(f"{table} {count}" for table, count in deleted.items() if count))
        return 0
    else:
        rows = study.export(store, study.study(store, args.study), args.out, force=args.force)
        print(f"{counted(rows, 'row', 'rows')} written to {args.out}")
        return 0
    if invites:
        print("Send each rater their link; it is shown only now (only its hash is stored):", file=sys.stderr)
    for invite in invites:
        print(f"{invite.rater_id}\t{invite.name}\t{invite_link(args.url, invite.token)}")
    if short := study.short_of_raters(store, chosen):
        print(short, file=sys.stderr)  # stdout stays the links, one a line, for a script to send
    return 0
