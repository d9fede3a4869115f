"""The stacks of the targets other than 5.14 (whose stack `test_exporter.py` verifies end to end, with a wheel per
step), exported from their PyPI sdists in every run, without wheels: every step transplanted, ruff-clean and minimal.

A file of its own, so that `pytest -n auto --dist loadfile` runs it next to `test_exporter.py`, not after it.
"""

import os

import pytest

from cache_crop_fix import export as exporter
from cache_crop_fix.targets import TARGETS, get_target


V5_14 = get_target("v5_14")


@pytest.mark.skipif(os.environ.get("CACHE_CROP_FIX_SKIP_E2E") == "1", reason="CACHE_CROP_FIX_SKIP_E2E=1")
@pytest.mark.parametrize(
    "target", [target for target in TARGETS if target is not V5_14], ids=lambda target: target.name
)
def test_the_other_stacks_export_from_their_sdist(target, tmp_path):
    # A 5.24 test once broke that stack's export, and no test failed
    report = exporter.export(
        target=target, build_dir=tmp_path / "build", dist_dir=tmp_path / "dist", run_verify=False, log=lambda _: None
    )
    assert [step.commit.created for step in report.steps] == [True] * len(target.steps)
    assert all(step.ruff.ok for step in report.steps)
