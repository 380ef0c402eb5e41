"""sip_core.analysis.uc_learnability: where a wrong UC prediction first goes wrong, and which test strings need a
transition that no training string takes (the numbers of docs/RESULTS.md, Table 1 UC)."""
import pandas as pd

from sip_core.analysis import uc_learnability as uc_errors
from sip_core.fst.machine import Machine

# 0 -a:x-> 1 (a withheld left, index 0), 1 -b:y-> 2 (a withheld right, 1), 0 -c:c-> 2 (2), 2 -d:-> 2 (3); 2 final
M = Machine(3, (2,), ((0, "a", "x", 1), (1, "b", "y", 2), (0, "c", "c", 2), (2, "d", "", 2)), "abcd")


def test_the_first_unseen_combination_is_a_right_after_a_left_or_a_left_after_a_right():
    assert uc_errors.first_unseen_step([0, 1, 3], {0}, {1}) == 1
    assert uc_errors.first_unseen_step([1, 0], {0}, {1}) == 1
    assert uc_errors.first_unseen_step([2, 3], {0}, {1}) is None


def test_the_divergence_step_is_the_input_step_that_wrote_the_first_wrong_character():
    assert uc_errors.divergence_step(M, "abd", "xy")[0] is None      # right ('d' writes nothing)
    assert uc_errors.divergence_step(M, "abd", "xz")[0] == 1
    assert uc_errors.divergence_step(M, "abd", "q")[0] == 0
    assert uc_errors.divergence_step(M, "abd", "xyq")[0] == 2          # runs on past the gold output
    assert uc_errors.divergence_step(M, "abd", "xy")[1] == [0, 1, 3]


def test_test_strings_through_an_untrained_transition_are_counted_apart(tmp_path):
    row = M.to_row() | {"task_id": "uc-s4-0", "withheld": [{"left": 0, "right": 1}]}
    eval_dir, runs = tmp_path / "eval", tmp_path / "runs" / "uc-s4-0"
    eval_dir.mkdir()
    runs.mkdir(parents=True)
    pd.DataFrame([row]).to_parquet(eval_dir / "fsts.parquet")
    # training never takes 'a' (index 0); both test strings do; the model is right on one
    examples = [("train", "c", "c"), ("train", "cd", "c"), ("test", "ab", "xy"), ("test", "abd", "xy")]
    pd.DataFrame([{"task_id": "uc-s4-0", "split": s, "input": x, "output": y} for s, x, y in examples]).to_parquet(
        eval_dir / "examples.parquet")
    pd.DataFrame({"input": ["ab", "abd"], "gold": ["xy", "xy"], "prediction": ["xy", "xz"]}).to_parquet(
        runs / "predictions.parquet")
    [result] = uc_errors.run_errors(eval_dir, runs.parent).to_dict("records")
    assert result["untrained_transitions"] == 2 and result["test_via_untrained"] == 2  # 'a' and 'b'
    assert result["acc"] == 50.0 and result["acc_via_untrained"] == 50.0
    assert result["first_error_at_first_unseen_combination"] == 1


def test_the_transitions_no_training_string_can_take_are_found_without_sampling():
    """The structural count (a search of the trimmed compositions) against what 2,000 sampled training strings take,
    on the first five tasks of the params' UC seed: the gpu Table 1 tasks, two of which have such transitions."""
    from sip_core.data.evaltasks import _task_job
    missing = []
    for i in range(5):
        row, examples = _task_job(("uc-s4", 1432347623, i, 2000, 10, 1))
        m = row["machine"]
        usable = uc_errors.trainable(m, {p["left"] for p in row["withheld"]}, {p["right"] for p in row["withheld"]})
        taken = {idx for *_, split, x, _ in examples if split == "train" for idx in m.path(x)[1]}
        assert taken <= usable
        assert usable - taken == set()  # 2,000 strings take every transition they can
        missing.append(len(m.transitions) - len(usable))
    assert missing == [0, 0, 4, 0, 3]
