"""Where fine-tuned runs go wrong on the UC tasks, and how much of a UC test set its training data determine
(sip_core/analysis/uc_learnability.py; docs/EXPERIMENTS.md, session 23).

    python experiments/uc_errors.py errors data/gpu/eval/uc-s4 data/gpu/runs/sip-d4/uc-s4 [--out FILE.csv]
    python experiments/uc_errors.py survey uc-s4 uc-s5 uc-s7 uc-s10 --tasks 1000 [--seed S] [--n-test 200] [--out F]

`errors`, per task of one model's runs: accuracy; where each wrong prediction first goes wrong (at, before or after the
first unseen combination); OSTIA's accuracy and agreement from the same training pairs; the transitions no training
string takes, the test strings that take one, and the run's accuracy on those and on the rest.
`survey`, per setting, over the pipeline's own task draw: how many tasks have transitions no training string can take,
the share of test strings that need one, and the ceiling that puts on any model's mean exact match.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from sip_core.analysis.uc_learnability import run_errors, survey


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    errors = sub.add_parser("errors", help="one model's runs of a UC eval set")
    errors.add_argument("eval_dir", type=Path, help="the UC eval set (examples.parquet, fsts.parquet)")
    errors.add_argument("runs_dir", type=Path, help="one model's runs of it (<task>/predictions.parquet)")
    many = sub.add_parser("survey", help="many generated tasks per setting")
    many.add_argument("settings", nargs="+")
    many.add_argument("--tasks", type=int, default=200)
    many.add_argument("--seed", type=int, default=1432347623, help="default: params' data.eval.seeds.uc")
    many.add_argument("--n-test", type=int, default=200)
    for p in (errors, many):
        p.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    if args.command == "errors":
        table = run_errors(args.eval_dir, args.runs_dir)
    else:
        table = pd.DataFrame([survey(s, args.tasks, args.seed, args.n_test) for s in args.settings])
    print(table.to_string(index=False))
    if args.out:
        table.to_csv(args.out, index=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
