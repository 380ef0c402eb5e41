"""gpu Table 3 so far: word accuracy / PER per language and model from the finished tasks of the g2p hand-off
archive (experiments/results/table3-gpu-partial/handoff.tar.00, session 14), read without unpacking it.
Also compares the tasks that ran twice: call 1 (test sets decoded 16 at a time) against the archive (256).
Usage: python experiments/table3_partial.py
"""
import collections
import json
import pathlib
import re
import tarfile

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent / "results" / "table3-gpu-partial"
TASK = re.compile(r"data/gpu/runs/([^/]+)/\.g2p\.partial/(g2p-(\w+)-d(\d))/metrics\.json$")


def finished(archive: pathlib.Path) -> dict[tuple[str, str], dict]:
    """{(model, task id): reported metrics} of every finished task in a hand-off archive."""
    out = {}
    with tarfile.open(archive) as tar:
        for member in tar.getmembers():
            if m := TASK.search(member.name):
                out[m[1], m[2]] = json.load(tar.extractfile(member))["reported"]
    return out


def main() -> None:
    runs = finished(HERE / "handoff.tar.00")
    models = sorted({m for m, _ in runs})
    by_lang = collections.defaultdict(lambda: collections.defaultdict(list))
    for (model, task), rep in runs.items():
        by_lang[task.split("-")[1]][model].append((rep["acc"], rep["per"]))
    print("lang  " + "".join(f"{m:>24}" for m in models) + "   (acc / PER, mean over draws; n draws)")
    for lang in sorted(by_lang):
        cells = []
        for m in models:
            vals = np.array(by_lang[lang][m]) if by_lang[lang][m] else None
            cells.append(f"{vals[:, 0].mean():6.1f} / {vals[:, 1].mean():.3f} (n={len(vals)})" if vals is not None else "-")
        print(f"{lang:6}" + "".join(f"{c:>24}" for c in cells))
    again = finished(HERE / "call1-eval-batch16.tar")
    print("\nsame task and seed run twice (call 1, eval batch 16 -> archive, eval batch 256): acc")
    for model in models:
        pairs = [(again[k]["acc"], runs[k]["acc"]) for k in sorted(again) if k[0] == model and k in runs]
        diffs = [b - a for a, b in pairs]
        print(f"  {model:16} " + " ".join(f"{a:.1f}->{b:.1f}" for a, b in pairs)
              + f"   max |diff| {max(map(abs, diffs)):.1f}, mean diff {np.mean(diffs):+.1f}")


if __name__ == "__main__":
    main()
