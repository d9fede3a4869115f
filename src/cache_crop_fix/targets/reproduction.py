"""What the reproductions of a step's text claim, and whether what they printed agrees.

A print annotated `# <release>: <stock output>. With this PR: <fixed output>` must print `<fixed output>` with the step
(an exception name if the block raises it there) and, on stock `<release>`, `<stock output>` (an exception name if the
block raises it; a remark in parentheses or after ", and" is not compared). `, then ` separates the outputs of a print
run several times. The verification of the exported steps and `tests/test_pr_texts.py` both check them.
"""

from __future__ import annotations

import re


BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)
FIXED = re.compile(r"# [^#]*With this PR: (.+)$")
STOCK = re.compile(r"# (\d+\.\d+\.\d+): (.+?)\. With this PR: ")
EXCEPTION = re.compile(r"[A-Z]\w*Error")


def reproductions(text: str) -> list[str]:
    """The code blocks of `text` that announce what they print."""
    return [block for block in BLOCK.findall(text) if any(FIXED.search(line) for line in block.splitlines())]


def fixed_claims(code: str) -> list[str]:
    """The outputs the prints announce with the step, in order (an exception name last if the code raises)."""
    return [
        value.strip().rstrip(".")
        for line in code.splitlines()
        if (match := FIXED.search(line))
        for value in match.group(1).split(", then ")
    ]


def stock_claims(code: str) -> tuple[str | None, list[str]]:
    """The release the comments name and the outputs they announce there, in order."""
    release, claims = None, []
    for line in code.splitlines():
        if match := STOCK.search(line):
            release = match.group(1)
            claim = re.split(r" \(|, and ", match.group(2))[0]
            claims += [value.strip() for value in claim.split(", then ")]
    return release, claims


def _disagreement(claims: list[str], printed: list[str], error: str | None) -> str | None:
    if claims and EXCEPTION.fullmatch(claims[-1]):
        if error != claims[-1] or printed[len(printed) - len(claims) + 1 :] != claims[:-1]:
            return f"announces {claims}, printed {printed} and raised {error}"
    elif error is not None or printed[-len(claims) :] != claims:
        return f"announces {claims}, printed {printed}" + (f" and raised {error}" if error else "")
    return None


def check_reproduction(
    code: str,
    with_step: tuple[list[str], str | None] | None,
    before: tuple[list[str], str | None] | None,
    release: str | None,
    on_base: bool,
) -> list[str]:
    """What is wrong with what `code` printed (and the name of what it raised) with the step and before it (on the
    base `release` when `on_base`, else on the pull request the step needs). Empty when it shows what it says."""
    if with_step is None or before is None:
        return ["did not run"]
    problems = []
    if (wrong := _disagreement(fixed_claims(code), *with_step)) is not None:
        problems.append(f"with the step, it {wrong}")
    claimed_release, claims = stock_claims(code)
    if on_base and claimed_release == release:
        if (wrong := _disagreement(claims, *before)) is not None:
            problems.append(f"on {release}, it {wrong}")
    elif tuple(with_step) == tuple(before):
        problems.append("it prints the same without the step")
    return problems
