"""``sip prefix distractors|analyse`` (tuned-prefix analysis, Figure 9) and ``sip t5 standin|ascii|table``
(the T5-Base path, Tables 8–10). Heavy imports stay inside the handlers: ``distractors`` needs the FST
code (pynini or its port), ``analyse`` torch; neither imports the other."""
from __future__ import annotations


def register(commands, data_commands) -> None:
    prefix = commands.add_parser("prefix", help="analysis of prefix-only fine-tuned prefixes (paper Figure 9)")
    sub = prefix.add_subparsers(dest="prefix_command", metavar="STEP", required=True)
    p = sub.add_parser("distractors", help="random FSTs with each gold task FST's states and vocabulary")
    p.add_argument("--fsts", required=True, help="gold task FSTs (eval/<setting>/fsts.parquet)")
    p.add_argument("--per-task", type=int, default=10_000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--out", required=True, help="distractors fsts.parquet")
    p.set_defaults(func=_distractors)

    p = sub.add_parser("analyse", help="permutation robustness and similarity to gold vs distractor FSTs")
    p.add_argument("--model", required=True, help="the SIP pre-training checkpoint the prefixes were tuned on")
    p.add_argument("--model-name", default="sip-d4")
    p.add_argument("--tasks", required=True, help="task examples.parquet (test split evaluated)")
    p.add_argument("--fsts", required=True, help="the tasks' gold fsts.parquet")
    p.add_argument("--tuned", required=True, help="runs of `sip finetune --freeze-body --save-prefix` (<task>/...)")
    p.add_argument("--distractors", required=True, help="`sip prefix distractors` output")
    p.add_argument("--permutations", type=int, default=20)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--tau", type=float, default=None, help="Sinkhorn temperature (default 0.02)")
    p.add_argument("--iters", type=int, default=None, help="Sinkhorn iterations (default 100)")
    p.add_argument("--eval-batch-size", type=int, default=64)
    p.add_argument("--scale", required=True)
    p.add_argument("--params", default=None, help="params.yaml (default: the repository's)")
    p.add_argument("--out", required=True, help="prefix.csv; .md and .meta.json go beside it")
    p.add_argument("--figure", help="Figure 9 (PNG)")
    p.add_argument("--precision", choices=["fp32", "tf32", "bf16"], default="fp32")
    p.add_argument("--device", default="auto")
    p.add_argument("--threads", type=int, default=None)
    p.set_defaults(func=_analyse)

    t5 = commands.add_parser("t5", help="the T5-Base path (paper Tables 8-10)")
    sub = t5.add_subparsers(dest="t5_command", metavar="STEP", required=True)
    p = sub.add_parser("standin", help="save a tiny random T5 in T5 v1.0 layout (a local stand-in for T5-Base)")
    p.add_argument("--out", required=True)
    p.add_argument("--vocab-size", type=int, default=512, help="sentencepiece-sized vocabulary (> 384)")
    p.add_argument("--d-model", type=int, default=64)
    p.add_argument("--d-ff", type=int, default=128)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--decoder-layers", type=int, default=None)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--d-kv", type=int, default=16)
    p.add_argument("--dropout", type=float, default=0.0)
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=_standin)
    p = sub.add_parser("ascii", help="a task file with non-ASCII characters mapped to ASCII, reversibly")
    p.add_argument("--tasks", required=True, help="natural task examples.parquet (with a 'group' column)")
    p.add_argument("--out", required=True, help="mapped examples.parquet")
    p.add_argument("--mapping", required=True, help="JSON with the mapping per group and side")
    p.set_defaults(func=_ascii)
    p = sub.add_parser("table", help="Tables 8-10 from T5 runs, or a plain 'not run' table without T5 weights")
    p.add_argument("--table", required=True, choices=["table8", "table9", "table10"])
    p.add_argument("--scale", required=True)
    p.add_argument("--runs", default=None, help="runs root of the T5 models")
    p.add_argument("--params", default=None)
    p.add_argument("--out", required=True)
    p.set_defaults(func=_t5_table)


def _distractors(args) -> int:
    from sip_core.analysis.distractors import build_distractors

    info = build_distractors(args.fsts, args.out, args.per_task, args.seed, args.workers)
    print(f"distractors: {info['tasks']} tasks x {info['per_task']} FSTs -> {args.out}")
    return 0


def _analyse(args) -> int:
    from sip_core.analysis import prefix

    args.tau = prefix.DEFAULT_TAU if args.tau is None else args.tau
    args.iters = prefix.DEFAULT_ITERS if args.iters is None else args.iters
    return prefix.main(args)


def _standin(args) -> int:
    from sip_core.errors import SipError
    from sip_core.report.t5_tables import write_standin

    if args.vocab_size <= 384:
        raise SipError("--vocab-size must exceed the 384 byte ids (a sentencepiece-sized vocabulary)")
    shape = {"d_model": args.d_model, "d_ff": args.d_ff, "num_layers": args.layers,
             "num_decoder_layers": args.decoder_layers or args.layers, "num_heads": args.heads, "d_kv": args.d_kv,
             "dropout": args.dropout}
    write_standin(args.out, shape, args.vocab_size, args.seed)
    print(f"t5 standin: vocabulary {args.vocab_size}, d_model {args.d_model} -> {args.out}")
    return 0


def _ascii(args) -> int:
    from sip_core.tasks.ascii_map import ascii_task_file

    info = ascii_task_file(args.tasks, args.out, args.mapping)
    print(f"t5 ascii: {info['rows']} rows, {info['groups']} groups, characters mapped {info['mapped']} -> {args.out}")
    return 0


def _t5_table(args) -> int:
    from sip_core import config
    from sip_core.jobscope import table_hash
    from sip_core.report.t5_tables import build

    params = config.load(args.params) if args.params else config.load()
    resolved = config.resolve(params, args.scale)
    print(build(args.table, args.scale, resolved, table_hash(resolved, args.table), args.runs, args.out))
    return 0
