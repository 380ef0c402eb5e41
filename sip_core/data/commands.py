"""`sip data d4|d4plus|d4long|nd7|set|eval|length|probe|stats`.

Handlers import pynini-using modules lazily, so `sip --help` and the other areas never load pynini.
"""
from __future__ import annotations

import argparse

from sip_core.errors import SipError

EVAL_SETTINGS = tuple(f"{t}-s{n}" for t in ("iteration", "uc") for n in (4, 5, 7, 10)) + (
    "bimachine-iteration", "bimachine-uc")


def _common(p: argparse.ArgumentParser, seed: int) -> None:
    p.add_argument("--out", required=True, help="output directory (fsts.parquet, examples.parquet)")
    p.add_argument("--seed", type=int, default=seed)
    p.add_argument("--workers", type=int, default=1, help="worker processes (same files for any number)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")


def register(commands, data_commands) -> None:
    for name, seed, what in (
        ("d4", 55, "SIP-d4 pre-training pool: deterministic FSTs with 2-4 states"),
        ("d4plus", 23434653, "SIP-d4+ continued pre-training pool: new deterministic FSTs"),
        ("d4long", 110, "SIP-d4-long pool: inputs with target length uniform in 1..110"),
        ("nd7", 55, "SIP-nd7 pool: bimachine (non-deterministic functional) FSTs, <= 7 states"),
        ("probe", 23434653, "probing data: ASCII FSTs, examples with state sequences"),
    ):
        p = data_commands.add_parser(name, help=what, description=what)
        _common(p, seed)
        small = name == "probe"
        p.add_argument("--n-train", type=int, default=8000 if small else 40000)
        p.add_argument("--n-dev", type=int, default=0 if small else 1000)
        p.add_argument("--n-test", type=int, default=1000)
        p.add_argument("--per-fst", type=int, default=5)
        p.add_argument("--exclude", nargs="*", default=[], metavar="FSTS_PARQUET",
                       help="pools whose train FSTs must not reappear (up to isomorphism)")
        if name in ("d4", "d4plus", "d4long"):
            p.add_argument("--with-states", action="store_true",
                           help="store each example's state sequence (for `sip pretrain --state-loss`)")
        p.set_defaults(func=_pool, pool=name)

    p = data_commands.add_parser("set", help="Set task pre-training data (Wu et al. 2022)")
    _common(p, 3293345)
    p.add_argument("--n-train", type=int, default=200000)
    p.add_argument("--n-dev", type=int, default=1000)
    p.set_defaults(func=_set)

    p = data_commands.add_parser("eval", help="synthetic evaluation tasks (iteration / UC / bimachines)")
    _common(p, 0)
    p.add_argument("--setting", required=True, metavar="SETTING",
                   help=f"iteration-s<n> | uc-s<n> (n = 2..14 states) | bimachine-iteration | bimachine-uc; "
                        f"the paper's: {', '.join(EVAL_SETTINGS)}")
    p.add_argument("--tasks", type=int, default=5)
    p.add_argument("--n-train", type=int, default=5000)
    p.add_argument("--n-test", type=int, default=1000)
    p.add_argument("--draws-per-length", type=int, default=5000,
                   help="iteration: random strings drawn per length 2..30 for the train/test pools")
    p.add_argument("--exclude", nargs="*", default=[], metavar="FSTS_PARQUET",
                   help="pre-training pools; evaluation FSTs are never isomorphic to their train FSTs")
    p.set_defaults(func=_eval)

    p = data_commands.add_parser("length", help="Table 11 length generalisation tasks (4-state FSTs)")
    _common(p, 1101)
    p.add_argument("--tasks", type=int, default=5)
    p.add_argument("--n-train", type=int, default=5000)
    p.add_argument("--n-test", type=int, default=1000, help="per test bucket (40-70, 90-110)")
    p.add_argument("--exclude", nargs="*", default=[], metavar="FSTS_PARQUET")
    p.set_defaults(func=_length)

    p = data_commands.add_parser("stats", help="Table 5: input length statistics as a tidy CSV")
    p.add_argument("--pretrain", nargs="*", default=[], metavar="EXAMPLES_PARQUET",
                   help="pre-training examples (setting 'pretrain', all splits but easy_dev)")
    p.add_argument("--eval", nargs="*", default=[], metavar="EXAMPLES_PARQUET",
                   help="evaluation task examples (iteration settings, incl. bimachine-iteration)")
    p.add_argument("--max-tasks", type=int, default=None,
                   help="only tasks 0..N-1 of each setting (the paper's Table 5: 5, also of the 10 bimachine tasks)")
    p.add_argument("--out", help="CSV path (default: print)")
    p.set_defaults(func=_stats)


def _summary(info: dict) -> None:
    print(" ".join(f"{k}={v}" for k, v in info.items()))


def _pool(args) -> int:
    from sip_core.data.pools import build_pool

    info = build_pool(args.pool, args.out, args.n_train, args.n_dev, args.n_test, args.per_fst, args.seed,
                      _workers(args), tuple(args.exclude), progress=not args.quiet,
                      with_states=getattr(args, "with_states", False))
    _summary(info)
    return 0


def _set(args) -> int:
    from sip_core.data.settask import build_set

    _summary(build_set(args.out, args.n_train, args.n_dev, args.seed))
    return 0


def _eval(args) -> int:
    from sip_core.data.evaltasks import build_eval

    info = build_eval(args.setting, args.out, args.tasks, args.n_train, args.n_test, args.seed, _workers(args),
                      tuple(args.exclude), draws_per_length=args.draws_per_length, progress=not args.quiet)
    _summary(info)
    return 0


def _length(args) -> int:
    from sip_core.data.evaltasks import build_length

    info = build_length(args.out, args.tasks, args.n_train, args.n_test, args.seed, _workers(args),
                        tuple(args.exclude), progress=not args.quiet)
    _summary(info)
    return 0


def _stats(args) -> int:
    from sip_core.data.stats import length_stats

    df = length_stats(pretrain=args.pretrain, eval_=args.eval, max_tasks=args.max_tasks)
    if args.out:
        from sip_core.io import write_text

        write_text(df.to_csv(index=False), args.out)
        print(f"rows={len(df)} out={args.out}")
    else:
        print(df.to_csv(index=False), end="")
    return 0


def _workers(args) -> int:
    if args.workers < 1:
        raise SipError(f"--workers must be >= 1, got {args.workers}")
    return args.workers
