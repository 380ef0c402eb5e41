"""The paper's numbers (sip-paper.tex), shown beside ours in every table's Markdown, never mixed in.

Keyed as (model, setting, metric) -> value with the table keys of DESIGN §6; ``paper:<row>`` models
(e.g. Charsiu) are cited rows we cannot run.
"""
from __future__ import annotations

MODELS_T1 = ("base", "naive", "set", "te", "sip-d4", "sip-d4-noprefix")


def _rows(models, settings, metrics, values):
    """Flatten a paper table given row-major values (one list per model)."""
    out = {}
    for model, row in zip(models, values):
        it = iter(row)
        for setting in settings:
            for metric in metrics:
                value = next(it)
                if value is not None:
                    out[(model, setting, metric)] = value
    return out


TABLE1 = _rows(
    MODELS_T1, ("iteration",), ("acc", "ed"),
    [[37.8, 5.87], [42.6, 4.41], [44.4, 4.58], [61.3, 2.49], [94.8, 0.12], [84.9, 0.62]],
) | _rows(
    MODELS_T1, ("uc",), ("acc", "acc_median", "ed", "ed_median"),
    [[47.4, 57.5, 1.49, 0.93], [44.9, 43.2, 1.52, 1.35], [43.6, 42.0, 1.47, 1.31],
     [57.3, 63.1, 1.13, 0.74], [73.1, 93.3, 0.61, 0.13], [61.1, 76.3, 0.99, 0.50]],
)

TABLE2 = _rows(
    ("base", "naive", "set", "te", "sip-d4", "sip-d4plus", "sip-nd7"), ("iteration", "uc"), ("acc", "ed"),
    [[83.4, 0.52, 83.1, 0.40], [83.1, 0.49, 84.2, 0.37], [82.3, 0.52, 83.7, 0.37], [84.2, 0.49, 82.7, 0.42],
     [87.8, 0.32, 90.0, 0.24], [88.2, 0.30, 90.5, 0.22], [89.5, 0.27, 91.2, 0.18]],
)

_T6_SETTINGS = ("s4", "s5", "s7", "s10")
TABLE6 = {}
for _kind, _values in (
    ("iteration", [[37.8, 5.87, 58.7, 3.21, 48.2, 3.71, 45.7, 3.87], [42.6, 4.41, 60.5, 2.20, 47.7, 3.16, 43.6, 3.65],
                   [44.4, 4.58, 62.2, 2.41, 48.0, 3.49, 45.3, 3.71], [61.3, 2.49, 78.9, 0.86, 55.7, 2.29, 50.7, 2.95],
                   [94.8, 0.12, 89.6, 0.27, 64.3, 1.34, 56.9, 2.39]]),
    ("uc", [[47.4, 1.49, 62.6, 1.05, 61.9, 1.29, 54.1, 1.70], [44.9, 1.52, 61.6, 1.08, 59.3, 1.30, 51.8, 1.68],
            [43.6, 1.47, 60.6, 1.09, 60.8, 1.31, 51.1, 1.71], [57.3, 1.13, 65.9, 0.98, 65.7, 1.17, 55.3, 1.60],
            [73.1, 0.61, 74.3, 0.69, 73.2, 0.85, 58.0, 1.44]]),
):
    TABLE6 |= _rows(("base", "naive", "set", "te", "sip-d4"), tuple(f"{_kind}-{s}" for s in _T6_SETTINGS),
                    ("acc", "ed"), _values)

G2P_LANGS = ("ban", "cop", "got", "lao", "syl", "tel", "tzm")
TABLE7 = _rows(
    ("paper:charsiu", "base", "set", "te", "sip-d4", "sip-d4-noprefix"), G2P_LANGS + ("avg",), ("acc", "per"),
    [[68.3, .110, 7.8, .579, 67.0, .067, 35.1, .238, 47.6, .196, 73.3, .070, 18.6, .403, 45.4, .238],
     [50.2, .233, 1.0, .847, 30.7, .269, 1.9, .760, 9.8, .598, 6.9, .597, 2.7, .851, 14.8, .594],
     [53.9, .216, 2.2, .742, 58.2, .094, 5.8, .595, 28.2, .353, 27.7, .293, 6.4, .658, 26.1, .421],
     [54.7, .183, 1.9, .756, 37.0, .174, 5.1, .573, 30.0, .309, 16.2, .377, 7.4, .644, 21.8, .431],
     [59.2, .152, 6.6, .563, 56.5, .096, 8.2, .498, 39.8, .252, 33.1, .228, 11.0, .544, 30.6, .333],
     [55.1, .168, 3.2, .681, 63.9, .072, 7.8, .508, 28.0, .333, 28.9, .252, 7.0, .593, 27.7, .372]],
)
TABLE3 = {k: v for k, v in TABLE7.items() if k[2] == "acc"}

TABLE4 = _rows(
    ("base", "paper:charsiu", "set", "te", "sip-d4", "sip-d4-noprefix"), ("rev-name", "sur-initial", "fst", "overall"),
    ("acc", "ed"),
    [[11.8, 6.81, 47.2, 1.76, 47.6, 1.42, 45.7, 1.72], [43.8, 1.73, 52.8, 0.87, 62.4, 0.74, 60.9, 0.80],
     [79.0, 1.34, 41.5, 3.37, 68.2, 0.71, 67.4, 0.89], [80.3, 1.08, 88.2, 0.41, 95.7, 0.11, 94.5, 0.17],
     [92.4, 0.34, 97.2, 0.10, 91.6, 0.13, 91.9, 0.14], [97.8, 0.10, 72.6, 0.51, 89.0, 0.27, 91.4, 0.18]],
)

TABLE5 = _rows(
    ("data",), ("s4-train", "s4-test", "s5-train", "s5-test", "s7-train", "s7-test", "s10-train", "s10-test",
                "bimachine-train", "bimachine-test", "pretrain"), ("len_min", "len_max", "len_mean"),
    [[2, 11, 4.66, 4, 30, 18.97, 2, 14, 5.39, 4, 30, 19.53, 2, 20, 6.12, 4, 30, 20.13, 2, 25, 7.31, 4, 30, 20.62,
      2, 30, 11.80, 5, 30, 23.07, 1, 35, 15.57]],
)

TABLE11 = {("base", "len-40-70", "acc"): 29.3, ("base", "len-40-70", "ed"): 15.60,
           ("sip-d4", "len-40-70", "acc"): 69.4, ("sip-d4", "len-40-70", "ed"): 2.61,
           ("base", "len-90-110", "acc"): 1.4, ("base", "len-90-110", "ed"): 55.37,
           ("sip-d4", "len-90-110", "acc"): 3.4, ("sip-d4", "len-90-110", "ed"): 34.50,
           ("sip-d4-long", "len-90-110", "acc"): 81.5, ("sip-d4-long", "len-90-110", "ed"): 1.09}

# Section 7 and Appendix (probing non-SIP models); the paper's "ByT5" probe is our probe-reinit.
PROBE = {("probe", "unseen-fsts", "acc_token"): 99.3, ("probe", "unseen-fsts", "acc_seq"): 93.9,
         ("heuristic", "unseen-fsts", "acc_token"): 68.9, ("heuristic", "unseen-fsts", "acc_seq"): 17.8,
         ("probe-reinit", "unseen-fsts", "acc_token"): 42.9, ("probe-reinit", "unseen-fsts", "acc_seq"): 8.1,
         ("probe-random", "unseen-fsts", "acc_token"): 42.5, ("probe-random", "unseen-fsts", "acc_seq"): 7.1,
         ("probe-transfer", "iteration-test", "acc_right"): 98.6,
         ("probe-transfer", "iteration-test", "acc_wrong"): 89.8}

# Simulation exact match of the pre-trained SIP-d4 on unseen FSTs ("~98%", Section 4).
PRETRAIN = {("sip-d4", "dev", "acc"): 98.0}

PAPER = {"table1": TABLE1, "table2": TABLE2, "table3": TABLE3, "table4": TABLE4, "table5": TABLE5,
         "table6": TABLE6, "table7": TABLE7, "table11": TABLE11, "pretrain": PRETRAIN,
         "probe": PROBE}

# Appendix B.3, T5-Base (Tables 8-10). Table 8's UC cells give mean/median.
TABLE8 = _rows(("t5-set", "t5-sip-d4"), ("iteration",), ("acc", "ed"), [[26.6, 6.26], [94.5, 0.11]]) | _rows(
    ("t5-set", "t5-sip-d4"), ("uc",), ("acc", "acc_median", "ed", "ed_median"),
    [[55.1, 54.6, 1.18, 1.02], [75.4, 99.5, 0.54, 0.01]])
TABLE9 = _rows(("t5-set", "t5-sip-d4"), ("iteration", "uc"), ("acc", "ed"),
               [[77.9, 0.73, 81.7, 0.53], [83.3, 0.56, 86.1, 0.37]])
TABLE10 = _rows(
    ("t5-set", "t5-sip-d4"), G2P_LANGS + ("avg",), ("acc", "per"),
    [[47.9, .231, 1.2, .783, 6.7, .458, 3.6, .643, 6.6, .611, 4.9, .612, 2.7, .797, 10.5, .591],
     [59.1, .154, 4.7, .640, 69.6, .059, 5.9, .566, 22.1, .447, 35.4, .191, 12.5, .509, 29.9, .367]])
PAPER.update(table8=TABLE8, table9=TABLE9, table10=TABLE10)
