"""Fixtures shared by test modules."""
from __future__ import annotations

import pytest

from tests.fixtures import ci_pipeline


@pytest.fixture(scope="session")
def ci_run(tmp_path_factory):
    """The repository copy in which the whole ci scale was built (once per session: it takes ~13 min)."""
    return ci_pipeline.build(tmp_path_factory)
