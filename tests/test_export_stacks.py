"""The stacks of the targets other than 5.14 (whose stack `test_exporter.py` verifies end to end, with a wheel per
step), exported in every run, without wheels: every step transplanted, ruff-clean and minimal. 5.24's from its PyPI
sdist; 5.25's into a checkout that has upstream's own test file, when the copy of it is there (else from its sdist).

A file of its own, so that `pytest -n auto --dist loadfile` runs it next to `test_exporter.py`, not after it.
"""

import ast
import difflib
import os
import subprocess
from pathlib import Path

import pytest

from cache_crop_fix import export as exporter
from cache_crop_fix.export.base import prepare_sdist_repo
from cache_crop_fix.export.shell import git
from cache_crop_fix.targets import TARGETS, get_target


V5_14 = get_target("v5_14")
# A copy of upstream's `tests/utils/test_cache_utils.py` at a recent commit, beside this repository (never committed
# into it: it is upstream's file)
UPSTREAM_TESTS = (
    Path(__file__).resolve().parents[2] / "shared" / "upstream" / "tests" / "utils" / "test_cache_utils.py"
)


# 5.25's stack is exported into a checkout that has upstream's test file instead, when there is a copy of it (below)
SDIST_STACKS = [
    target for target in TARGETS if target is not V5_14 and not (target.name == "v5_25" and UPSTREAM_TESTS.exists())
]


@pytest.mark.skipif(os.environ.get("CACHE_CROP_FIX_SKIP_E2E") == "1", reason="CACHE_CROP_FIX_SKIP_E2E=1")
@pytest.mark.parametrize("target", SDIST_STACKS, ids=lambda target: target.name)
def test_the_other_stacks_export_from_their_sdist(target, tmp_path):
    # A 5.24 test once broke that stack's export, and no test failed
    report = exporter.export(
        target=target, build_dir=tmp_path / "build", dist_dir=tmp_path / "dist", run_verify=False, log=lambda _: None
    )
    assert [step.commit.created for step in report.steps] == [True] * len(target.steps)
    assert all(step.ruff.ok for step in report.steps)


@pytest.mark.skipif(os.environ.get("CACHE_CROP_FIX_SKIP_E2E") == "1", reason="CACHE_CROP_FIX_SKIP_E2E=1")
@pytest.mark.skipif(not UPSTREAM_TESTS.exists(), reason=f"no copy of upstream's test file at {UPSTREAM_TESTS}")
def test_main_stack_appends_to_upstreams_test_file_in_a_checkout(tmp_path):
    """With `--repo`, a checkout that has upstream's `tests/utils/test_cache_utils.py` gets our test classes appended
    to it: the series modifies the file (creates none that upstream has) and removes none of its lines."""
    target = get_target("v5_25")
    sdist = prepare_sdist_repo(target, tmp_path / "build", log=lambda _: None)
    checkout = tmp_path / "transformers"
    subprocess.run(["git", "clone", "-q", str(sdist), str(checkout)], check=True)
    (checkout / "tests" / "utils").mkdir(parents=True)
    (checkout / "tests" / "utils" / "test_cache_utils.py").write_text(UPSTREAM_TESTS.read_text())
    git(checkout, "add", "-A")
    git(checkout, "-c", "user.name=Upstream", "-c", "user.email=upstream@example.com", "commit", "-q", "-m", "tests")
    report = exporter.export(
        target=target,
        repo=checkout,
        build_dir=tmp_path / "build",
        dist_dir=tmp_path / "dist",
        run_verify=False,
        author="A Contributor <contributor@example.com>",
        log=lambda _: None,
    )
    # Every step transplanted, ruff-clean and minimal, as from the sdist
    assert [step.commit.created for step in report.steps] == [True] * len(target.steps)
    assert all(step.ruff.ok for step in report.steps)
    path = "tests/utils/test_cache_utils.py"
    upstream = [step for step in report.steps if step.plan.upstream]
    first = upstream[0].commit
    # Modified by the first pull request, not added; later ones (on their own branches) modify it or leave it
    assert git(checkout, "diff", "--name-status", first.parent, first.commit, "--", path).split() == ["M", path]
    for step in report.steps:
        status = git(checkout, "diff", "--name-status", step.commit.parent, step.commit.commit, "--", path).split()
        assert status in ([], ["M", path]), (step.commit.branch, status)
    # Every upstream line is still there, in order
    merged = git(checkout, "show", f"{report.steps[-1].commit.commit}:{path}").splitlines()
    removed = [line for line in difflib.ndiff(UPSTREAM_TESTS.read_text().splitlines(), merged) if line[:1] == "-"]
    assert removed == []
    # It is valid Python, and every class of the series for that file is in it. (It is not run here: the copy of upstream's file is
    # newer than 5.25.0 and imports names 5.25.0 lacks; our classes run in the verification of every export.)
    tree = ast.parse("\n".join(merged))
    defined = {node.name for node in tree.body if isinstance(node, ast.ClassDef)}
    assert set().union(*(step.plan.tests.get(path, ()) for step in upstream)) <= defined
