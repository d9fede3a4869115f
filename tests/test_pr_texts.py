"""The reproductions in the pull request texts of the installed release's target print what their comments say
(`cache_crop_fix.targets.reproduction`), with the fix and on stock transformers.

Each block runs in a fresh namespace, once on stock transformers and once with the fix, in this process
(`cache_crop_fix.revert()` / `apply()`). The export's verification runs them again on each step's own branch.
"""

import contextlib
import io

import pytest

import cache_crop_fix
import transformers
from cache_crop_fix.targets import target_for
from cache_crop_fix.targets.reproduction import check_reproduction, reproductions


TARGET = target_for(transformers.__version__)
REPRODUCTIONS = [
    (step.branch, number, block) for step in TARGET.steps for number, block in enumerate(reproductions(step.summary))
]


def _run(block: str) -> tuple[list[str], str | None]:
    output = io.StringIO()
    error = None
    with contextlib.redirect_stdout(output):
        try:
            exec(compile(block, "<pull request text>", "exec"), {"__name__": "__main__"})
        except Exception as exception:  # what the block raises is part of what it shows
            error = type(exception).__name__
    return output.getvalue().splitlines(), error


def test_every_step_with_a_behaviour_change_shows_a_reproduction():
    # the clamp's and the history's texts at least; a step without a printed reproduction must say why in its text
    assert {branch for branch, _, _ in REPRODUCTIONS} >= {TARGET.steps[0].branch}


@pytest.mark.parametrize("branch, number, block", REPRODUCTIONS, ids=[f"{b}-{n}" for b, n, _ in REPRODUCTIONS])
def test_reproduction_prints_what_its_comments_say(branch, number, block):
    cache_crop_fix.revert()
    try:
        stock = _run(block)
    finally:
        cache_crop_fix.apply()
    fixed = _run(block)
    assert check_reproduction(block, fixed, stock, transformers.__version__, on_base=True) == []
    assert stock != fixed, "the block shows no difference on stock"
