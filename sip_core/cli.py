"""The ``sip`` command line: one dispatcher, each area registers its own subcommands.

Areas register lazily-importing handlers so that ``sip data ...`` and ``sip table ...`` never import torch
(5 s on a CI core, for each of the ci scale's ~60 jobs that need none) and ``sip finetune ...`` never imports
pynini (GPU hosts have no pynini). tests/test_cli_imports.py checks it.
Run as ``sip ...`` after installation or ``python -m sip_core.cli ...`` from a checkout.
"""
from __future__ import annotations

import argparse
import importlib
import sys

from sip_core.errors import SipError

# Each module defines register(commands, data_commands): `commands` are top-level subparsers,
# `data_commands` the subparsers of `sip data`. Handlers are set with parser.set_defaults(func=...).
AREAS = (
    "sip_core.data.commands",     # sip data d4|d4plus|d4long|nd7|set|eval|length|probe|stats
    "sip_core.tasks.commands",    # sip data fetch|g2p|sygus
    "sip_core.train.commands",    # sip pretrain|finetune|evaluate|predict
    "sip_core.release",           # sip use-release (a released checkpoint as a scale's model)
    "sip_core.report.commands",   # sip table|report
    "sip_core.analysis.commands", # sip probe train|report, sip data length-bucket
    "sip_core.analysis.appendix_commands",  # sip prefix distractors|analyse, sip t5 standin|ascii|table
    "sip_core.handoff",           # sip export|handoff-run|import (GPU hand-off, DESIGN §8)
    "sip_core.dvcstages",         # sip dvc-yaml
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sip", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    data = commands.add_parser("data", help="build datasets as Parquet")
    data_commands = data.add_subparsers(dest="data_command", metavar="DATASET", required=True)
    for area in AREAS:
        try:
            module = importlib.import_module(area)
        except ModuleNotFoundError as err:
            if err.name == area:  # an area not built yet; its commands are simply absent
                continue
            raise
        module.register(commands, data_commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    args.cli_argv = list(sys.argv[1:] if argv is None else argv)  # `sip finetune --task-workers` reruns it per task
    try:
        result = args.func(args)
    except SipError as err:
        print("sip: error: " + " ".join(str(err).splitlines()), file=sys.stderr)  # always one line
        return 2
    except KeyboardInterrupt:
        print("sip: interrupted", file=sys.stderr)
        return 130
    return int(result or 0)


if __name__ == "__main__":
    sys.exit(main())
