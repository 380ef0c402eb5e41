"""Settings of the appendix analyses per scale (workflow/rules/appendix.smk): params.yaml `appendix`
(defaults are the paper's protocol; a scale overrides only what it changes). Each job's params hash covers
only the settings it reads (sip_core.jobscope), so entries here rerun only the jobs that use them."""
from __future__ import annotations

from sip_core import config
from sip_core.jobscope import T5_TABLE_SETTINGS  # noqa: F401  (Tables 8-10: what each is built from)


def appendix_settings(scale: str, params: dict | None = None) -> dict:
    return config.resolve(params or config.load(), scale)["appendix"]
