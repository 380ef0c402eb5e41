"""The two steps of the probing study, as the `sip probe` commands run them.

``probing``: train the probe on the pre-trained SIP-d4 (true FST prefix) and the two model baselines,
score all three and the heuristic on unseen FSTs; saves the SIP-d4 probe for ``transfer``.
``transfer``: read state sequences with that frozen probe from SIP-d4 fine-tuned on the 4-state
iteration tasks (runs saved with ``sip finetune --save-model``), align, confusion matrices, right-vs-wrong test.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pyarrow.compute as pc
import torch
from safetensors.torch import load_file, save_file

from sip_core.analysis import probe as P
from sip_core.analysis import transfer as T
from sip_core.analysis.states import gold_states, heuristic_accuracy
from sip_core.errors import SipError
from sip_core.fst.machine import Machine
from sip_core.io import atomic_path, write_json
from sip_core.model.loading import load_sip
from sip_core.train import runtime
from sip_core.train.data import load_pool, make_split, read_parquet

PROBE_FILE = "probe.safetensors"
PROBING_FILE = "probing.json"
MODEL_SEEDS = {"probe-reinit": 1, "probe-random": 2}  # weight seeds of the baseline models


def _machines(fsts_path: Path) -> dict[int, Machine]:
    return {int(r["fst_id"]): Machine.from_row(r) for r in read_parquet(fsts_path).to_pylist()}


def probing(checkpoint: str, data_dir: str, out_dir: str, init: str = "scratch", lr: float = P.LR,
            batch_size: int = P.BATCH_SIZE, epochs: int = P.EPOCHS, seed: int = 0, device: str = "auto",
            threads: int | None = None) -> dict:
    started = time.monotonic()
    dev = runtime.pick_device(device)
    runtime.configure_threads(dev, threads)
    model = load_sip(checkpoint).to(dev).eval()
    if model.config.prefix_mode != "fst":
        raise SipError(f"{checkpoint} is not a SIP pre-training checkpoint (prefix mode "
                       f"{model.config.prefix_mode!r}, not 'fst')")
    pool = load_pool(data_dir, with_fsts=True, num_states=model.config.num_states, symbols=model.config.symbols)
    for name in ("train", "test"):
        if name not in pool.splits or pool.splits[name].states is None:
            raise SipError(f"{data_dir} needs train and test examples with states (build it with `sip data probe`)")
    train, test = pool.splits["train"], pool.splits["test"]
    n_classes = P.n_classes_of(train, test)
    results, probes = {}, {}
    candidates = {"probe": lambda: model,
                  "probe-reinit": lambda: P.reinit_transformer(model, init, seed + MODEL_SEEDS["probe-reinit"]),
                  "probe-random": lambda: P.random_model(model, seed + MODEL_SEEDS["probe-random"])}
    for name, make in candidates.items():
        m = make()
        probe = P.train_probe(m, P.probe_data(m, train, dev, pool.fsts), n_classes, lr, batch_size, epochs, seed)
        results[name] = P.accuracy(*P.predict_states(m, probe, P.probe_data(m, test, dev, pool.fsts))).as_dict()
        probes[name] = probe
        print(f"{name}: token {results[name]['acc_token']:.1f}%, sequence {results[name]['acc_seq']:.1f}%")
    machines = _machines(Path(data_dir) / "fsts.parquet")
    ex = read_parquet(Path(data_dir) / "examples.parquet")
    ex = ex.filter(pc.equal(ex.column("split"), "test"))
    items = [(machines[int(f)], x, s) for f, x, s in zip(ex.column("fst_id").to_pylist(),
                                                      ex.column("input").to_pylist(), ex.column("states").to_pylist())]
    results["heuristic"] = heuristic_accuracy(items)
    print(f"heuristic: token {results['heuristic']['acc_token']:.1f}%, sequence {results['heuristic']['acc_seq']:.1f}%")
    out = Path(out_dir)
    with atomic_path(out / PROBE_FILE) as tmp:
        save_file({k: v.detach().cpu().contiguous() for k, v in probes["probe"].state_dict().items()}, str(tmp))
    info = {"checkpoint": str(checkpoint), "state_head": bool(getattr(model.config, "state_head", False)),
            "d_model": model.config.d_model, "n_classes": n_classes, "baseline_init": init,
            "hyperparameters": {"optimizer": "adagrad", "lr": lr, "batch_size": batch_size, "epochs": epochs,
                                "seed": seed},
            "n_train": len(train), "n_test": len(test), "results": results,
            "device": runtime.device_name(dev), "commit": runtime.git_commit(),
            "wall_seconds": round(time.monotonic() - started, 2)}
    write_json(info, out / PROBING_FILE)
    return info


def load_probe(probe_dir: str | Path, device) -> tuple[torch.nn.Linear, dict]:
    probe_dir = Path(probe_dir)
    info_path = probe_dir / PROBING_FILE
    if not info_path.exists():
        raise SipError(f"{info_path} is missing (run `sip probe train` first)")
    info = json.loads(info_path.read_text())
    probe = torch.nn.Linear(info["d_model"], info["n_classes"])
    probe.load_state_dict(load_file(str(probe_dir / PROBE_FILE)))
    return probe.to(device).eval(), info


def _task_split(examples, task_id: str, split: str) -> tuple[list[str], list[str]]:
    mask = pc.and_(pc.equal(examples.column("task_id"), task_id), pc.equal(examples.column("split"), split))
    sub = examples.filter(mask)
    return sub.column("input").to_pylist(), sub.column("output").to_pylist()


def transfer(probe_dir: str, finetuned: str, tasks_dir: str, resamples: int = 20_000, seed: int = 0,
             device: str = "auto", threads: int | None = None) -> dict:
    """Per task and split: aligned accuracies and row-normalised confusion; pooled right-vs-wrong test."""
    from sip_core.report.significance import permutation_test

    dev = runtime.pick_device(device)
    runtime.configure_threads(dev, threads)
    probe, info = load_probe(probe_dir, dev)
    tasks_dir = Path(tasks_dir)
    examples = read_parquet(tasks_dir / "examples.parquet")
    fsts = read_parquet(tasks_dir / "fsts.parquet").to_pylist()
    runs = sorted(p.parent for p in Path(finetuned).glob("*/model.safetensors"))
    if not runs:
        raise SipError(f"no fine-tuned models (<task>/model.safetensors) under {finetuned}; "
                       f"fine-tune with `sip finetune ... --save-model`")
    by_task = {r["task_id"]: Machine.from_row(r) for r in fsts}
    per_split = {"train": {"pred": [], "gold": [], "matrices": []}, "test": {"pred": [], "gold": [], "matrices": []}}
    right_correct, wrong_correct, tasks = [], [], []
    for run in runs:
        task_id = run.name
        if task_id not in by_task:
            raise SipError(f"{run}: task {task_id!r} is not in {tasks_dir}/fsts.parquet")
        machine = by_task[task_id]
        model = load_sip(run).to(dev).eval()
        if model.config.d_model != info["d_model"]:
            raise SipError(f"{run} has d_model {model.config.d_model}, the probe reads {info['d_model']}")
        read = {}
        for split in ("train", "test"):
            inputs, outputs = _task_split(examples, task_id, split)
            data = P.probe_data(model, make_split(inputs, outputs, states=gold_states(machine, inputs)), dev)
            read[split] = P.predict_states(model, probe, data) + (inputs,)
        mapping = T.align(T.confusion(read["train"][0], read["train"][1], machine.n_states, info["n_classes"]))
        for split, (pred, gold, _inputs) in read.items():
            aligned = T.relabel(pred, mapping, info["n_classes"])
            per_split[split]["pred"] += aligned
            per_split[split]["gold"] += gold
            per_split[split]["matrices"].append(T.row_normalised(aligned, gold, machine.n_states))
        pred, gold, inputs = read["test"]
        seq_right = [bool(np.array_equal(p, g)) for p, g in zip(T.relabel(pred, mapping, info["n_classes"]), gold)]
        correct = _model_correct(run, inputs)
        right_correct += [c for c, r in zip(correct, seq_right) if r]
        wrong_correct += [c for c, r in zip(correct, seq_right) if not r]
        tasks.append({"task_id": task_id, "mapping": {str(k): v for k, v in sorted(mapping.items())}})
    result = {"tasks": tasks, "splits": {}}
    for split, acc in per_split.items():
        result["splits"][split] = P.accuracy(acc["pred"], acc["gold"]).as_dict() | {
            "confusion": T.mean_matrix(acc["matrices"]).tolist()}
    test = {"n_right": len(right_correct), "n_wrong": len(wrong_correct),
            "acc_right": 100.0 * float(np.mean(right_correct)) if right_correct else None,
            "acc_wrong": 100.0 * float(np.mean(wrong_correct)) if wrong_correct else None,
            "p_value": None, "resamples": resamples, "seed": seed}
    if right_correct and wrong_correct:
        test["p_value"] = permutation_test(right_correct, wrong_correct, resamples, seed).p_value
    result["right_vs_wrong"] = test
    return result


def _model_correct(run: Path, inputs: list[str]) -> list[float]:
    """1.0 where the fine-tuned model's final test prediction equals the gold output (its predictions.parquet)."""
    table = read_parquet(run / "predictions.parquet").to_pydict()
    if table["input"] != inputs:
        raise SipError(f"{run}/predictions.parquet does not hold the task's test inputs in order")
    return [float(p == g) for p, g in zip(table["prediction"], table["gold"])]
