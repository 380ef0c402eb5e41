"""``sip table``: build a result table (CSV + Markdown + meta.json) from run outputs or data;
``sip report significance|claims``: permutation tests over tasks and the paper's claims."""
from __future__ import annotations

from pathlib import Path


def register(commands, data_commands) -> None:
    table = commands.add_parser("table", help="build results/<scale>/tableN.{csv,md,meta.json}")
    table.add_argument("--table", required=True, help="table1, table2, table3, table4, table5, table6, table7, table11")
    table.add_argument("--scale", required=True)
    table.add_argument("--runs", help="runs root: <root>/<model>/<setting>/<task>/metrics.json")
    table.add_argument("--pretrain", nargs="*", default=[], help="Table 5: pre-training examples files")
    table.add_argument("--eval", nargs="*", default=[], help="Table 5: evaluation task examples files")
    table.add_argument("--params", default=None, help="params.yaml (default: the repository's)")
    table.add_argument("--out", required=True, help="output CSV path; .md and .meta.json go beside it")
    table.add_argument("--figure", help="also draw the table's figure here (table6: Figure 3; pretrain: the "
                       "training curves)")
    table.add_argument("--checkpoints", nargs="*", default=[],
                       help="pretrain: checkpoint directories (each with pretrain_metrics.json)")
    table.set_defaults(func=_table)
    register_report(commands)


def register_report(commands) -> None:
    report = commands.add_parser("report", help="significance tests and the paper's claims over results")
    sub = report.add_subparsers(dest="report_command", metavar="REPORT", required=True)
    sig = sub.add_parser("significance", help="paired permutation tests over tasks -> significance.csv")
    sig.add_argument("--runs", required=True, help="runs root: <root>/<model>/<setting>/<task>/metrics.json")
    sig.add_argument("--pairs", nargs="+", metavar="A:B@SETTING[,SETTING]",
                     help="default: the paper's tests plus every test the claims make")
    sig.add_argument("--results", help="results/<scale>/ (resolves '*' of the claims against its tables)")
    sig.add_argument("--metric", default="acc")
    sig.add_argument("--alternative", default="two-sided", choices=("two-sided", "greater", "less"))
    sig.add_argument("--resamples", type=int, default=20_000)
    sig.add_argument("--seed", type=int, default=0)
    sig.add_argument("--out", required=True, help="tidy CSV path (+ .md, .meta.json beside it); per-task scores "
                                                  "go to <out stem>.tasks.csv")
    sig.set_defaults(func=_significance)
    claims = sub.add_parser("claims", help="check the paper's claims -> <results>/claims.md")
    claims.add_argument("results", help="results/<scale>/ with tableN.csv, pretrain.csv, probe.csv")
    claims.add_argument("--runs", help="runs root, for the paired tests over tasks")
    claims.add_argument("--resamples", type=int, default=20_000)
    claims.add_argument("--seed", type=int, default=0)
    claims.add_argument("--out", help="default: <results>/claims.md")
    claims.set_defaults(func=_claims)
    spread = sub.add_parser("spread", help="CI tolerance from tables built with different seeds -> tolerance.json")
    spread.add_argument("dirs", nargs="+", help="results/<scale>/ directories of runs with different seed offsets")
    spread.add_argument("--tables", nargs="+", required=True, help="table names measured (e.g. table1 pretrain)")
    spread.add_argument("--factor", type=float, default=3.0, help="tolerance = factor × largest seed std")
    spread.add_argument("--floor", nargs="*", default=["acc=2.0", "ed=0.05", "per=0.01", "len=0", "sim=0.25",
                                                       "rank=400", "p=1.0"],
                        metavar="FAMILY=VALUE", help="minimum tolerance per metric family")
    spread.add_argument("--out", required=True)
    spread.add_argument("--for-table", default=None, metavar="TABLE",
                        help="record the spread as TABLE's own tolerance (by_table) in the existing --out file, "
                             "leaving the other tables' tolerance as it is")
    spread.set_defaults(func=_spread)


def _load_runs_dir(path: str):
    from sip_core.errors import SipError
    from sip_core.report.runs import load_runs

    if not Path(path).is_dir():
        raise SipError(f"runs directory {path} does not exist")
    runs = load_runs(path)
    if runs.empty:
        raise SipError(f"no runs (<model>/<setting>/<task>/metrics.json) under {path}")
    return runs


def _significance(args) -> int:
    from sip_core.errors import SipError
    from sip_core.io import write_json, write_text
    from sip_core.report import claims, significance
    from sip_core.report.tables import git_commit

    if args.resamples < 10_000:
        raise SipError(f"--resamples must be >= 10000 for stable p-values, got {args.resamples}")
    runs = _load_runs_dir(args.runs)
    if args.pairs:
        pairs = [significance.parse_pair(p, args.metric, args.alternative) for p in args.pairs]
    else:
        results = Path(args.results) if args.results else None
        pairs = list(significance.PAPER_PAIRS) + claims.tested_pairs(runs, results)
    summary, scores = significance.significance_table(runs, pairs, args.resamples, args.seed)
    if not summary["n"].any():
        raise SipError(f"no pair has tasks run for both models under {args.runs}")
    out = Path(args.out)
    write_text(significance.tidy(summary).to_csv(index=False, lineterminator="\n"), out)
    write_text(significance.to_markdown(summary, "Significance tests over tasks"), out.with_suffix(".md"))
    write_json({"commit": git_commit(), "runs": str(args.runs), "n_runs": int(len(runs)),
                "resamples": args.resamples, "seed": args.seed,
                "pairs": summary[["pair", "alternative"]].to_dict("records")}, out.with_suffix(".meta.json"))
    write_text(scores.to_csv(index=False, lineterminator="\n"), out.with_name(out.stem + ".tasks.csv"))
    for row in summary.itertuples():
        numbers = "no paired tasks" if row.n == 0 else f"diff {row.mean_diff:+.2f}, p={row.p_value:.3g}"
        print(f"{row.pair}: n={row.n}, {numbers}")
    return 0


def _claims(args) -> int:
    from sip_core.errors import SipError
    from sip_core.io import write_text
    from sip_core.report import claims

    results = Path(args.results)
    if not results.is_dir():
        raise SipError(f"results directory {results} does not exist")
    runs = _load_runs_dir(args.runs) if args.runs else None
    checked = [claims.check(c, results, runs, args.resamples, args.seed) for c in claims.CLAIMS]
    out = Path(args.out) if args.out else results / "claims.md"
    write_text(claims.to_markdown(checked, f"The paper's claims at {results.name}"), out)
    for result in checked:
        print(claims.summary_line(result))
    print(f"claims -> {out}")
    return 0


def _table(args) -> int:
    from sip_core import config
    from sip_core.errors import SipError
    from sip_core.jobscope import table_config, table_hash
    from sip_core.report import tables
    from sip_core.report.runs import load_runs

    params = config.load(args.params) if args.params else config.load()
    resolved = config.resolve(params, args.scale)
    phash = table_hash(resolved, args.table)  # only the settings this table is built from
    init = resolved["model"]["init"]
    if args.table == "table5":
        from sip_core.data.stats import length_stats

        # the paper's row per setting = its first `tasks` tasks (bimachines: 5 of 10, those of Table 2)
        frame = length_stats(pretrain=args.pretrain, eval_=args.eval, max_tasks=resolved["data"]["eval"]["tasks"])
        meta = tables.build_meta(frame.iloc[0:0].assign(device=None, params_hash=None, wall_s=None),
                                 args.scale, phash, init)
        tables.write_table(frame, args.out, "table5", "Input lengths of the generated data (paper Table 5)", meta)
        print(f"table5: {len(frame)} rows -> {args.out}")
        return 0
    if args.table == "pretrain":
        frame, runs = tables.pretrain_table([Path(c) for c in args.checkpoints])
        meta = tables.build_meta(runs, args.scale, phash, init)
        # each model's own run: how far it trained, where, from which code
        meta["models"] = {r["model"]: {k: r[k] for k in ("steps", "wall_s", "device", "status", "commit")}
                          for r in runs.to_dict("records")}
        tables.write_table(frame, args.out, "pretrain", "Simulation exact match of the pre-trained models", meta)
        if args.figure:
            from sip_core.report.figures import pretrain_figure

            pretrain_figure([Path(c) for c in args.checkpoints], args.figure, f" ({args.scale})")
        print("pretrain: " + ", ".join(f"{r.model} {r.setting} {r.value:.1f}" for r in frame.itertuples()))
        return 0
    if args.table not in tables.TABLES:
        raise SipError(f"unknown table {args.table!r}; known: table5, {', '.join(tables.TABLES)}")
    if not args.runs:
        raise SipError(f"{args.table} needs --runs")
    spec = tables.TABLES[args.table]
    cfg = table_config(resolved, args.table) or {}
    models = cfg.get("models") or resolved["tables"]["table1"]["models"]
    if spec.max_task_index is not None and cfg.get("tasks"):
        spec = tables.TableSpec(**{**spec.__dict__, "max_task_index": cfg["tasks"]})
    runs = load_runs(args.runs, models=models)
    frame = tables.aggregate(runs, spec, models)
    in_table = runs["model"].isin(models) & runs["setting"].map(spec.setting_of).notna()  # this table's runs only
    meta = tables.build_meta(runs[in_table], args.scale, phash, init)
    from sip_core.report.significance import table_notes

    tables.write_table(frame, args.out, args.table, spec.title, meta, table_notes(runs, args.table))
    if args.figure:
        from sip_core.report.figures import more_states_figure

        more_states_figure(frame, args.figure, f" ({args.scale})")
    first = frame[frame["metric"] == spec.metrics[0]]
    if (first["setting"] == "overall").any():  # the table's own summary column, not a mean that counts it again
        first = first[first["setting"] == "overall"]
    headline = first.groupby("model")["value"].mean().round(1)
    print(f"{args.table} ({args.scale}, {int(in_table.sum())} runs): " + ", ".join(f"{m} {v}" for m, v in headline.items()))
    return 0


def _spread(args) -> int:
    import json

    import pandas as pd

    from sip_core.errors import SipError
    from sip_core.io import write_json
    from sip_core.report.regression import spread_tolerance

    per_seed = [pd.concat([pd.read_csv(Path(d) / f"{t}.csv").assign(table=t) for t in args.tables])
                for d in args.dirs]
    per_seed = [t.assign(setting=t["table"] + ":" + t["setting"]) for t in per_seed]
    floors = {k: float(v) for k, v in (f.split("=", 1) for f in args.floor)}
    result = spread_tolerance(per_seed, args.factor, floors)
    result["measured_on"] = {"dirs": [str(d) for d in args.dirs], "tables": args.tables}
    if args.for_table:  # one table's own tolerance, the measured families only, beside the general one
        if not Path(args.out).exists():
            raise SipError(f"--for-table adds to an existing tolerance file; {args.out} does not exist")
        spec = json.loads(Path(args.out).read_text())
        spec.setdefault("by_table", {})[args.for_table] = result
        write_json(spec, args.out)
        print(f"{args.for_table}: tolerance {result['tolerance']} (max seed std {result['max_seed_std']}) -> {args.out}")
        return 0
    for fam, value in floors.items():  # families not measured (e.g. per) still get their floor
        result["tolerance"].setdefault(fam, value)
    write_json(result, args.out)
    print(f"tolerance {result['tolerance']} (max seed std {result['max_seed_std']}) -> {args.out}")
    return 0
