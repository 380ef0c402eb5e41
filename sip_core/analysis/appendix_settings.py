"""Settings of the appendix analyses per scale (workflow/rules/appendix.smk): the prefix studies, the
significance report and the T5-Base path.

Kept out of params.yaml for the reason pipeline.ANALYSIS_TABLES gives: every run records the params hash,
so a new params entry would make Snakemake rerun every existing fine-tuning job. Defaults are the paper's
protocol; a scale overrides only what it changes.
"""
from __future__ import annotations

from sip_core.config import deep_merge

DEFAULTS = {
    # Appendix "Analysis of fine-tuned prefixes": SIP-d4, prefix-only, 20 epochs at LR 0.5 on the
    # 4-state iteration tasks; 20 permutations per prefix; 10,000 distractor FSTs per task.
    "prefix": {"model": "sip-d4", "setting": "iteration-s4", "epochs": 20, "prefix_lr": 0.5, "batch_size": 32,
               "permutations": 20, "distractors": 10_000, "seed": 4242},
    "significance": {"resamples": 20_000, "seed": 0},
    # Appendix B.3 (REFERENCE §7.1 "T5-SIP"): init null = no T5-Base weights here: Tables 8-10 say "not run".
    # `standin`: a tiny random sentencepiece-vocabulary T5 saved locally (`sip t5 standin`).
    "t5": {"init": None, "standin_vocab": 512,
           # epochs: T5-SIP's config has 20; T5-Set is "analogous to Set", which trains 1 epoch
           "pretrain": {"epochs": {"t5-sip-d4": 20, "t5-set": 1}, "batch_size": 16, "grad_accum": 2, "lr": 1.0e-4,
                        "warmup": 100, "schedule": "constant", "precision": "fp32"},
           # which of our models' fine-tuning protocol (prefix, batch, LRs) each T5 model follows
           "models": {"t5-sip-d4": "sip-d4", "t5-set": "set"}},
}

SCALES = {
    "ci": {"prefix": {"permutations": 5, "distractors": 300},
           "t5": {"init": "standin", "pretrain": {"epochs": {"t5-sip-d4": 0.25}}}},  # the path, cheaply
    "cpu": {"prefix": {"permutations": 10, "distractors": 2000}},
    "gpu": {"t5": {"pretrain": {"precision": "bf16"}}},
    "paper": {"t5": {"init": "t5-base"}},
}

# Tables 8-10: what each is built from (the runs of the T5 models on these settings).
T5_TABLE_SETTINGS = {"table8": ["iteration-s4", "uc-s4"], "table9": ["bimachine-iteration", "bimachine-uc"],
                     "table10": ["g2p-ascii"]}


def appendix_settings(scale: str) -> dict:
    return deep_merge(DEFAULTS, SCALES.get(scale, {}))
