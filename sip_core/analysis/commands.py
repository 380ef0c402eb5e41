"""`sip probe train|report` (paper Section 7, Figure 5) and `sip data length-bucket` (Table 11 settings).

torch is imported inside the handlers only; nothing here needs pynini (runs on GPU hosts).
"""
from __future__ import annotations

from pathlib import Path

TITLE = "Probing FST states in the encoder (paper Section 7, Figure 5)"
PROBED = ("probe", "probe-reinit", "probe-random", "heuristic")
PROBING_SETTING = "unseen-fsts"


def register(commands, data_commands) -> None:
    p = data_commands.add_parser("length-bucket", help="one Table 11 setting (len-LO-HI) from `sip data length` tasks")
    p.add_argument("--length", required=True, help="directory of `sip data length` (examples.parquet, fsts.parquet)")
    p.add_argument("--bucket", required=True, help="40-70 | 90-110 (or len-40-70 ...)")
    p.add_argument("--out", required=True)
    p.set_defaults(func=_bucket)

    probe = commands.add_parser("probe", help="linear state probe on the encoder and its transfer")
    sub = probe.add_subparsers(dest="probe_command", metavar="STEP", required=True)
    t = sub.add_parser("train", help="probe SIP-d4 and the baselines on unseen FSTs -> DIR/probing.json + probe")
    t.add_argument("--model", required=True, help="pre-trained SIP checkpoint (FST prefix)")
    t.add_argument("--data", required=True, help="`sip data probe` directory (train/test with states)")
    t.add_argument("--out", required=True, help="directory for probe.safetensors and probing.json")
    t.add_argument("--init", default="scratch",
                   help="re-initialised Transformer baseline: scratch or a T5/ByT5 path (the paper: ByT5-small)")
    t.add_argument("--lr", type=float, default=0.1, help="Adagrad LR (the original's)")
    t.add_argument("--batch-size", type=int, default=32)
    t.add_argument("--epochs", type=int, default=1)
    _runtime(t)
    t.set_defaults(func=_train)
    r = sub.add_parser("report", help="transfer to fine-tuned SIP-d4, Figure 5 and results/<scale>/probe.*")
    r.add_argument("--probe", required=True, help="directory written by `sip probe train`")
    r.add_argument("--finetuned", required=True, help="runs root <task>/{model.safetensors,predictions.parquet}")
    r.add_argument("--tasks", required=True, help="the 4-state iteration tasks (examples.parquet, fsts.parquet)")
    r.add_argument("--scale", required=True)
    r.add_argument("--out", required=True, help="probe.csv path; .md and .meta.json go beside it")
    r.add_argument("--figure-train", required=True)
    r.add_argument("--figure-test", required=True)
    r.add_argument("--resamples", type=int, default=20_000, help="permutation test resamples (>= 10000)")
    _runtime(r)
    r.set_defaults(func=_report)


def _runtime(p) -> None:
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="auto")
    p.add_argument("--threads", type=int, default=None,
                   help="CPU threads (default $SIP_THREADS, else 1 on a CPU and one per core on a GPU)")


def _bucket(args) -> int:
    from sip_core.analysis.lengths import build_bucket

    info = build_bucket(args.length, args.bucket, args.out)
    print(" ".join(f"{k}={v}" for k, v in info.items()))
    return 0


def _train(args) -> int:
    from sip_core.analysis.study import probing

    probing(args.model, args.data, args.out, args.init, args.lr, args.batch_size, args.epochs, args.seed,
            args.device, args.threads)
    return 0


def _report(args) -> int:
    import json

    import numpy as np

    from sip_core.analysis.study import PROBING_FILE, transfer
    from sip_core.analysis.transfer import confusion_figure
    from sip_core.errors import SipError
    from sip_core.io import write_json, write_text
    from sip_core.report.tables import to_markdown

    if args.resamples < 10_000:
        raise SipError(f"--resamples must be >= 10000, got {args.resamples}")
    path = Path(args.probe) / PROBING_FILE
    if not path.exists():
        raise SipError(f"{path} is missing (run `sip probe train` first)")
    probing = json.loads(path.read_text())
    result = transfer(args.probe, args.finetuned, args.tasks, args.resamples, args.seed, args.device, args.threads)
    for split, out in (("train", args.figure_train), ("test", args.figure_test)):
        confusion_figure(np.asarray(result["splits"][split]["confusion"], float), out,
                         f"frozen probe on fine-tuned SIP-d4, {split} ({args.scale})")
    frame, meta, notes = probe_table(probing, result, args.scale, args.finetuned)
    out = Path(args.out)
    write_text(frame.to_csv(index=False, lineterminator="\n"), out)
    write_text(to_markdown(frame, "probe", TITLE, meta) + "\n" + notes, out.with_suffix(".md"))
    write_json(meta, out.with_suffix(".meta.json"))
    rw = result["right_vs_wrong"]
    print(f"probe ({args.scale}): " + ", ".join(
        f"{m} {probing['results'][m]['acc_token']:.1f}/{probing['results'][m]['acc_seq']:.1f}" for m in PROBED)
        + f"; transfer test token {result['splits']['test']['acc_token']:.1f}, right {rw['n_right']} "
        f"wrong {rw['n_wrong']}, p={rw['p_value']}")
    return 0


def probe_table(probing: dict, result: dict, scale: str, finetuned: str):
    """probe.csv rows (model, setting, metric, value, n), meta.json and the notes under the Markdown table."""
    import json

    import pandas as pd

    from sip_core import config
    from sip_core.jobscope import table_hash
    from sip_core.report.tables import build_meta

    rows = []
    for model in PROBED:
        r = probing["results"][model]
        rows += [(model, PROBING_SETTING, "acc_token", r["acc_token"], r["n_seq"]),
                 (model, PROBING_SETTING, "acc_seq", r["acc_seq"], r["n_seq"])]
    for split in ("train", "test"):
        r = result["splits"][split]
        rows += [("probe-transfer", f"iteration-{split}", "acc_token", r["acc_token"], r["n_seq"]),
                 ("probe-transfer", f"iteration-{split}", "acc_seq", r["acc_seq"], r["n_seq"])]
    rw = result["right_vs_wrong"]
    rows += [("probe-transfer", "iteration-test", "acc_right", rw["acc_right"], rw["n_right"]),
             ("probe-transfer", "iteration-test", "acc_wrong", rw["acc_wrong"], rw["n_wrong"])]
    frame = pd.DataFrame(rows, columns=["model", "setting", "metric", "value", "n"])
    frame["value"] = frame["value"].astype(float).round(4)
    runs = [{"device": probing["device"], "params_hash": None, "wall_s": probing["wall_seconds"]}]
    for path in sorted(Path(finetuned).glob("*/metrics.json")):
        m = json.loads(path.read_text())
        runs.append({"device": m.get("device"), "params_hash": m.get("params_hash"), "wall_s": m.get("wall_seconds")})
    resolved = config.resolve(config.load(), scale)
    meta = build_meta(pd.DataFrame(runs), scale, table_hash(resolved, "probe"), resolved["model"]["init"])
    meta.update({"probed_checkpoint": probing["checkpoint"], "state_head": probing["state_head"],
                 "baseline_init": probing["baseline_init"], "n_classes": probing["n_classes"],
                 "probe_hyperparameters": probing["hyperparameters"], "probe_n_train": probing["n_train"],
                 "probe_n_test": probing["n_test"], "right_vs_wrong": rw, "alignment": result["tasks"],
                 "confusion": {s: result["splits"][s]["confusion"] for s in ("train", "test")}})
    p = "–" if rw["p_value"] is None else f"{rw['p_value']:.2g}"
    caveat = ("**Caveat: the probed checkpoint was pre-trained with `--state-loss` (it has a state head, "
              "`config.state_head = true`): its encoder was supervised to encode FST states, so a probe finding "
              "them is no evidence that SIP pre-training alone induces state tracking.**\n\n"
              if probing["state_head"] else
              "The probed checkpoint has no state head (`config.state_head = false`): its pre-training never saw "
              "FST states.\n\n")
    notes = (caveat +
             f"`{PROBING_SETTING}`: probes trained one epoch (Adagrad LR {probing['hyperparameters']['lr']}, batch "
             f"{probing['hyperparameters']['batch_size']}) on {probing['n_train']} instances of the probing FSTs, "
             f"scored on {probing['n_test']} instances of unseen ones, at every input byte and EOS; n = sequences. "
             "`probe`: SIP-d4 with the true FST prefix; `probe-reinit`: SIP-d4's FST encoder with the Transformer "
             f"re-initialised (`{probing['baseline_init']}`); `probe-random`: every weight random; `heuristic`: "
             "q0 = start, then a uniform draw among the destinations of transitions reading the previous symbol "
             "(exact expectation).\n\n"
             "`probe-transfer`: the frozen `probe` applied to SIP-d4 fine-tuned on each 4-state iteration task; "
             "predicted ids matched to the task FST's states by the Hungarian algorithm fitted on the task's "
             "training inputs, applied to train and test. `acc_right`/`acc_wrong`: the fine-tuned model's test "
             f"accuracy where the read sequence is right ({rw['n_right']}) / wrong ({rw['n_wrong']}); unpaired "
             f"approximate permutation test, {rw['resamples']} resamples: p = {p} (paper: p ≈ 5e-5). Figures: "
             "`fig5_confusion_train.png`, `fig5_confusion_test.png` (row-normalised, mean over tasks).\n")
    return frame, meta, notes
