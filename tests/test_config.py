"""params.yaml: the committed file validates, scales resolve by deep merge, bad params are one-line errors."""
import copy

import pytest
import yaml

from sip_core import config
from sip_core.errors import SipError


def test_committed_params_validate_and_every_scale_resolves():
    params = config.load()
    hashes = {config.params_hash(config.resolve(params, s)) for s in config.SCALES}
    assert len(hashes) == len(config.SCALES)


def test_scale_overrides_only_what_it_names():
    params = config.load()
    ci = config.resolve(params, "ci")
    assert ci["pretrain"]["sip"]["precision"] == params["defaults"]["pretrain"]["sip"]["precision"]
    assert ci["data"]["pools"]["d4"]["per_fst"] == 5  # inherited
    assert ci["data"]["pools"]["d4"]["n_train"] != params["defaults"]["data"]["pools"]["d4"]["n_train"]


@pytest.mark.parametrize("mutate, where", [
    (lambda p: p["defaults"]["data"]["pools"]["d4"].update(n_train=0), "n_train"),
    (lambda p: p.update(scale="huge"), "scale"),
    (lambda p: p["scales"]["ci"]["pretrain"]["sip"].update(precision="fp8"), "precision"),
    (lambda p: p["defaults"]["model"]["shape"].update(heads=4), "shape"),
])
def test_bad_params_are_rejected_with_the_offending_key(tmp_path, mutate, where):
    params = copy.deepcopy(config.load())
    mutate(params)
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params))
    with pytest.raises(SipError, match=where):
        config.load(path)


def test_unknown_scale_and_broken_yaml(tmp_path):
    with pytest.raises(SipError, match="unknown scale"):
        config.resolve(config.load(), "laptop")
    path = tmp_path / "params.yaml"
    path.write_text("scale: [unclosed\n")
    with pytest.raises(SipError, match="not valid YAML"):
        config.load(path)
