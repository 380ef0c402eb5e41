"""A uniform model soup (Wortsman et al., 2022) of fine-tuned runs of one task: average their weights (body and
tuned prefix alike), evaluate the average on the task's test split, and put it beside the runs' own accuracy and
their majority vote. Question (docs/EXPERIMENTS.md, session 12): the runs err on different strings (a vote of 5
scores 93%, their mean 80%); does one averaged model keep that gain?

Usage (runs saved with --save-model; the GPU host or here):
  python experiments/soup.py --tasks data/gpu/eval/iteration-s4/examples.parquet --task-id iteration-s4-0 \
      --out /tmp/soup/iteration-s4-0 RUN_DIR RUN_DIR ...
Prints one line and writes OUT/soup.json.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import torch
from safetensors.torch import load_file

from sip_core.eval.vote import vote_runs
from sip_core.model.loading import load_sip, save_model


def average_weights(runs: list[Path]) -> dict[str, torch.Tensor]:
    """The mean of every floating-point tensor over the runs (others, if any, from the first run)."""
    states = [load_file(str(r / "model.safetensors")) for r in runs]
    return {k: (torch.stack([s[k].float() for s in states]).mean(0).to(v.dtype) if v.is_floating_point() else v)
            for k, v in states[0].items()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", required=True)
    ap.add_argument("--task-id", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--eval-batch-size", type=int, default=256)
    ap.add_argument("runs", nargs="+", type=Path)
    args = ap.parse_args()
    out = Path(args.out)
    model = load_sip(args.runs[0])
    missing, unexpected = model.load_state_dict(average_weights(args.runs), strict=False)
    if unexpected or any(not k.endswith("embed_tokens.weight") for k in missing):  # those two are tied to `shared`
        raise SystemExit(f"soup: the runs' weights do not fit their config: {missing} {unexpected}")
    save_model(model, out / "model")
    subprocess.run([sys.executable, "-m", "sip_core.cli", "evaluate", "--model", str(out / "model"), "--tasks",
                    args.tasks, "--task-id", args.task_id, "--out", str(out / "eval"), "--eval-batch-size",
                    str(args.eval_batch_size), "--no-progress"], check=True, stdout=subprocess.DEVNULL)
    soup = json.loads((out / "eval" / "metrics.json").read_text())["reported"]["acc"]
    # each run's last-epoch accuracy: the weights the soup averages (`reported` is a mean over the last epochs)
    runs = [json.loads((r / "metrics.json").read_text())["epochs"][-1]["acc"] for r in args.runs]
    vote = vote_runs(args.runs)["metrics"]["acc"]
    result = {"task_id": args.task_id, "runs": [str(r) for r in args.runs], "run_acc": runs,
              "mean_run_acc": sum(runs) / len(runs), "vote_acc": vote, "soup_acc": soup}
    (out / "soup.json").write_text(json.dumps(result, indent=1) + "\n")
    print(f"{args.task_id}: runs {' '.join(f'{a:.1f}' for a in runs)} (mean {result['mean_run_acc']:.1f}); "
          f"vote {vote:.1f}; soup {soup:.1f}")


if __name__ == "__main__":
    main()
