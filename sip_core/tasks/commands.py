"""``sip data fetch|g2p|sygus``: external files and the natural (g2p, text-editing) task files."""
from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

from sip_core.errors import SipError


def register(commands, data_commands) -> None:
    fetch = data_commands.add_parser("fetch", help="fetch the pinned WikiPron/SyGuS files (SHA-256 verified)")
    fetch.add_argument("--mirror", help="a local directory (or http(s) URL) with the same layout; "
                                        "default: the public URLs at the pinned commits")
    fetch.add_argument("--out", required=True, help="output directory (<collection>/<file>)")
    fetch.add_argument("--only", nargs="+", metavar="NAME",
                       help="collections (wikipron, sygus_pbe_strings_2017) or names (wikipron/ban_bali_broad.tsv)")
    fetch.add_argument("--timeout", type=float, default=60.0, help="seconds per download")
    fetch.set_defaults(func=_fetch)

    g2p = data_commands.add_parser("g2p", help="WikiPron g2p tasks: per language and draw, n-train train, rest test")
    g2p.add_argument("--langs", default="ban,cop,got,lao,syl,tel,tzm", help="comma-separated ISO codes")
    _common(g2p, draws=5, n_train=100)
    g2p.set_defaults(func=_g2p)

    sygus = data_commands.add_parser("sygus", help="SyGuS 2017 text-editing tasks: per task and draw")
    sygus.add_argument("--tasks", default="all", help="comma-separated task names (default: the paper's 19)")
    _common(sygus, draws=8, n_train=5)
    sygus.set_defaults(func=_sygus)


def _common(parser: argparse.ArgumentParser, draws: int, n_train: int) -> None:
    parser.add_argument("--raw", required=True, help="directory written by `sip data fetch` (or a mirror)")
    parser.add_argument("--draws", type=int, default=draws, help="draws per task; draw k uses seed S+k")
    parser.add_argument("--n-train", type=int, default=n_train)
    parser.add_argument("--max-test", type=int, help="keep at most this many test examples per draw")
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--out", required=True, help="output directory; writes examples.parquet")


def _names(value: str) -> list[str]:
    names = [v.strip() for v in value.split(",") if v.strip()]
    if len(set(names)) != len(names):
        raise SipError(f"a name is listed twice in {value!r}")
    return names


def _fetch(args) -> None:
    from tqdm import tqdm

    from sip_core.tasks.download import fetch, select

    only = [n for item in args.only for n in _names(item)] if args.only else None
    sources = select(only)
    actions = Counter()
    with tqdm(total=len(sources), desc="fetch", unit="file", leave=False, disable=None) as bar:
        for source in sources:  # `with` closes the bar before an error line is printed
            actions[fetch(source, args.out, args.mirror, args.timeout)] += 1
            bar.update()
    print(f"fetch: {sum(actions.values())} files in {args.out}, SHA-256 verified "
          f"({actions['copied']} copied, {actions['downloaded']} downloaded, "
          f"{actions['present']} already present)")


def _g2p(args) -> None:
    from sip_core.tasks.wikipron import read_wikipron, source_name

    files = {lang: Path(args.raw) / source_name(lang) for lang in _names(args.langs)}  # check names first
    rows = []
    for lang, path in files.items():
        data = read_wikipron(path)
        print(data.summary(), file=sys.stderr)
        rows += _draws(f"g2p-{lang}", lang, data.pairs, args)
    _write(rows, args, "g2p")


def _sygus(args) -> None:
    from sip_core.tasks.sygus import TASKS, group_of, read_sygus, source_name

    tasks = TASKS if args.tasks == "all" else _names(args.tasks)
    unknown = [t for t in tasks if t not in TASKS]
    if unknown:
        raise SipError(f"not among the paper's 19 SyGuS tasks: {', '.join(unknown)} (known: {', '.join(TASKS)})")
    rows = []
    for task in tasks:
        data = read_sygus(Path(args.raw) / source_name(task))
        print(data.summary(), file=sys.stderr)
        rows += _draws(f"sygus-{task}", group_of(task), data.pairs, args)
    _write(rows, args, "sygus")


def _draws(prefix, group, pairs, args):
    from sip_core.tasks.draws import task_rows

    return task_rows(prefix, group, pairs, args.draws, args.seed, args.n_train, args.max_test)


def _write(rows, args, what: str) -> None:
    from sip_core.tasks.taskfile import write_tasks

    out = Path(args.out) / "examples.parquet"
    write_tasks(rows, out)
    tasks = {r[0] for r in rows}
    splits = Counter(r[3] for r in rows)
    print(f"{what}: {len(tasks)} tasks ({args.draws} draws, seed {args.seed}), {splits['train']} train / "
          f"{splits['test']} test examples → {out}")
