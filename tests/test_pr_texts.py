"""The reproductions in the pull request texts of the installed release's target print what their comments say.

A print annotated `# <release>: <stock output>. With this PR: <fixed output>` must print `<fixed output>` with the fix
(`ValueError` if it says so: the block then raises there) and, on stock `<release>`, `<stock output>` (an exception name
if the block raises it; a remark in parentheses or after ", and" is not compared). Each block runs in
a fresh namespace, once on stock transformers and once with the fix, in this process (`cache_crop_fix.revert()` /
`apply()`).
"""

import contextlib
import io
import re

import pytest

import cache_crop_fix
import transformers
from cache_crop_fix.targets import target_for


TARGET = target_for(transformers.__version__)
BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)
FIXED = re.compile(r"# [^#]*With this PR: (.+)$")
STOCK = re.compile(r"# (\d+\.\d+\.\d+): (.+?)\. With this PR: ")
EXCEPTION = re.compile(r"[A-Z]\w*Error")
REPRODUCTIONS = [
    (step.branch, number, block)
    for step in TARGET.steps
    for number, block in enumerate(BLOCK.findall(step.summary))
    if any(FIXED.search(line) for line in block.splitlines())
]


def _run(block: str) -> tuple[list[str], BaseException | None]:
    output = io.StringIO()
    error = None
    with contextlib.redirect_stdout(output):
        try:
            exec(compile(block, "<pull request text>", "exec"), {})
        except Exception as exception:  # what the block raises is part of what it shows
            error = exception
    return output.getvalue().splitlines(), error


def _expected(block: str) -> list[str]:
    """The fixed outputs the block's prints announce, in order (`0, then 0` for a print run twice)."""
    return [
        value.strip().rstrip(".")
        for line in block.splitlines()
        if (match := FIXED.search(line))
        for value in match.group(1).split(", then ")
    ]


def _stock_claims(block: str) -> tuple[str | None, list[str]]:
    """The release the block's comments name and the stock outputs they announce, in order."""
    release, claims = None, []
    for line in block.splitlines():
        if match := STOCK.search(line):
            release = match.group(1)
            claim = re.split(r" \(|, and ", match.group(2))[0]
            claims += [value.strip() for value in claim.split(", then ")]
    return release, claims


def test_every_step_with_a_behaviour_change_shows_a_reproduction():
    # the clamp's and the history's texts at least; a step without a printed reproduction must say why in its text
    assert {branch for branch, _, _ in REPRODUCTIONS} >= {TARGET.steps[0].branch}


@pytest.mark.parametrize("branch, number, block", REPRODUCTIONS, ids=[f"{b}-{n}" for b, n, _ in REPRODUCTIONS])
def test_reproduction_prints_what_its_comments_say(branch, number, block):
    expected = _expected(block)
    cache_crop_fix.revert()
    try:
        stock, stock_error = _run(block)
    finally:
        cache_crop_fix.apply()
    fixed, fixed_error = _run(block)
    if expected[-1] == "ValueError":
        assert isinstance(fixed_error, ValueError), (fixed, fixed_error)
        assert fixed == expected[:-1] and stock_error is None, (stock, stock_error)
    else:
        assert fixed_error is None, fixed_error
        assert fixed[-len(expected) :] == expected, fixed
    assert (stock, type(stock_error)) != (fixed, type(fixed_error)), "the block shows no difference on stock"
    release, claims = _stock_claims(block)
    if release == transformers.__version__:
        if EXCEPTION.fullmatch(claims[-1]):
            assert type(stock_error).__name__ == claims[-1], (stock, stock_error)
            assert stock[len(stock) - len(claims) + 1 :] == claims[:-1], stock
        else:
            assert stock_error is None, stock_error
            assert stock[-len(claims) :] == claims, stock
