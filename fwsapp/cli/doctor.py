"""`doctor`: what this setup can run."""
from __future__ import annotations

from pathlib import Path

from fwsapp.cli.options import command


def register(commands) -> None:
    command(commands, cmd_doctor, "doctor", models=True,
        help="what this setup can run: device, memory, models, tokenizers, backends, database")


def cmd_doctor(args) -> int:
    from fwsapp.orchestration.doctor import checks

    for check in checks(Path(args.db), device=args.device, dtype=args.dtype):
        print(f"{check.status:<8}{check.topic:<11}{check.item:<38} {check.detail}")
    return 0
