"""Stage 7: one short pull request text per step, in the order of upstream's template: what and why, behaviour
changes, tests, how it relates to the other pull requests on the subject. Long tables are folded in `<details>`. The
AI-disclosure checkbox of upstream's template is left unticked: it is for the person who opens the pull request."""

from __future__ import annotations

import re
from collections.abc import Sequence

from ..targets import Target, get_target
from .base import BRANCH, Base
from .commit import StepCommit
from .format import RuffReport
from .plan import StepPlan
from .verify import StepVerification


ISSUE = 47433
REVIEWERS = "@zucchini-nlp @Cyrilvallez"
AI_CHECKBOX = "- [ ] I confirm that this is not a pure code agent PR."


def commit_message(plan: StepPlan, total: int) -> str:
    """`total`: the number of pull requests of the upstream series; a fork step says it is not one of them."""
    # the reproductions go in the pull request text, not the commit message
    body = re.sub(r"\s*```python\n.*?```\s*", "\n\n", plan.step.summary, flags=re.DOTALL).strip()
    lines = [plan.step.title, "", *_wrap(body), ""]
    if plan.step.behaviour_changes:
        lines += ["Behaviour changes:", *(f"- {change}" for change in plan.step.behaviour_changes), ""]
    if plan.upstream:
        lines.append(f"Part {plan.number} of {total} of the fix for #{ISSUE}.")
    else:
        lines.append(f"Fork only (`{BRANCH}`): not part of the {total} pull requests of the upstream series.")
    return "\n".join(lines) + "\n"


def _wrap(text: str, width: int = 100) -> list[str]:
    import textwrap

    return [line for paragraph in text.split("\n\n") for line in [*textwrap.wrap(paragraph, width), ""]][:-1]


def pr_text(
    plan: StepPlan,
    plans: Sequence[StepPlan],
    commit: StepCommit,
    ruff: RuffReport,
    verification: StepVerification | None,
    base: Base,
    target: Target,
) -> str:
    """The text of an upstream step's pull request; `plans` are the pull requests of the series, in order."""
    plans = [other for other in plans if other.upstream]
    total = len(plans)
    names = [f"`{plans[number - 1].branch}`" for number in plan.needs]  # the pull requests come first in the stack
    needed = (", ".join(names[:-1]) + " and " + names[-1] if len(names) > 1 else names[0]) if names else None
    if len(names) > 2 and plan.needs == tuple(range(1, plan.number)):  # every earlier one (a backport's)
        needed = f"{names[-1]} and the pull requests before it"
    # On `main`, #47433 (reported against 5.14) is closed: the series follows it and #47720 (`tokens_to_remove`) up
    what = (
        f"the fix for #{ISSUE}" if target.closes_issue or target.backport_of else f"a follow-up to #47720 / #{ISSUE}"
    )
    if target.backport_of:
        main = get_target(target.backport_of)
        what = f"the {target.label} of {what} (the stack for `main`, on transformers {main.sdist_version}, goes first)"
    position = (
        f"Part {plan.number} of {total} of {what}"
        + (f". Needs {needed}: it is built on {'that one' if len(plan.needs) == 1 else 'those'}." if needed else "")
        + ("; it applies to `main` on its own." if needed is None and total > 1 and not target.backport_of else "")
        + ("." if needed is None and (total == 1 or target.backport_of) else "")
        + (f" Fixes #{ISSUE}." if plan.number == 1 and target.closes_issue else "")
    )
    lines = [f"# {plan.step.title}", "## What does this PR do?", fold_long_code(plan.step.summary), position, ""]
    if target.backport_of:
        lines += [
            f"This is a backport: upstream takes fixes on `main` first (transformers {main.sdist_version}). Only the first "
            f"PR of this stack (`{plans[0].branch}`) is a candidate for a {target.sdist_version.rsplit('.', 1)[0]}.x patch "
            "release; the others serve users who install the fork branch (`fix-cache-crop`).",
            "",
        ]
    if len(plan.step.behaviour_changes) == 1:
        lines += [f"**Behaviour change:** {plan.step.behaviour_changes[0]}", ""]
    elif plan.step.behaviour_changes:
        lines += ["## Behaviour changes", *(f"- {change}" for change in plan.step.behaviour_changes), ""]
    lines += ["## Tests"]
    lines += new_tests(plan)
    # What every pull request of the series would repeat goes below the fold
    checks = [f"- `ruff check` and `ruff format --check` with the repository's settings: {_ruff(ruff)}."]
    if base.is_sdist:
        checks.append(
            "- Built on the PyPI sdist, which has no `tests/utils/`: this branch and its patch are for `pip install`. "
            "The pull request is made from an export on a transformers checkout (`--repo`)."
        )
    details = []
    if verification is not None:
        against = "the unpatched base" if needed is None else f"the base with {needed}"
        behaviour, api = verification.fail_before("behaviour"), verification.fail_before("api")
        counts = []
        if behaviour[1]:
            what = (
                f"reproduce #{ISSUE}"
                if plan.number == 1 and target.closes_issue
                else "show the behaviour this PR fixes"
            )
            counts.append(f"{behaviour[0]} of {behaviour[1]} state-checking tests fail ({what})")
        if api[1]:
            counts.append(f"{api[0]} of {api[1]} tests of new API or wording fail (the API is new)")
        lines.append(f"- Against {against}: {'; '.join(counts)}.")
        skipped = f" ({verification.skipped()} skipped)" if verification.skipped() else ""
        checks.insert(
            0,
            f"- With this PR, transformers from the branch (its `src/`) passes all {len(verification.outcomes)} tests "
            f"of {'this PR' if needed is None else 'this PR and those it is built on'} in a clean venv{skipped}, and "
            "its reproductions print what their comments say.",
        )
        details = [
            "<details><summary>Per test class: failing against the previous state; checks</summary>",
            "",
            "| test class | kind | fail before | pass after |",
            "|---|---|---|---|",
        ]
        for name, (failing, count) in verification.failing_classes_before().items():
            kind = "new API / wording" if name in plan.step.api_tests else "behaviour"
            details.append(f"| `{name}` | {kind} | {failing}/{count} | {count}/{count} |")
        details += ["", *checks, "", "</details>", ""]
    else:
        lines += ["- Not verified in this export (`--no-verify`).", *checks]
    lines += ["", *details]
    # The threads the series relates to, once: the later pull requests point to the first
    if target.related and plan.number == 1:
        lines += ["## Related", target.related, ""]
    lines += [
        "## Code Agent Policy",
        AI_CHECKBOX,
        "",
        "## Who can review?",
        f"cache / generate: {REVIEWERS}",
        "",
    ]
    return "\n".join(lines)


def fold_long_code(summary: str, max_lines: int = 10) -> str:
    """`summary` with each code block of more than `max_lines` lines folded in `<details>` (the reviewer reads the
    sentence before it and the output its comment announces; the block runs as it is)."""

    def fold(match: re.Match) -> str:
        block = match.group(0)
        if block.count("\n") - 1 <= max_lines:
            return block
        return f"<details><summary>Reproduction</summary>\n\n{block}\n\n</details>"

    return re.sub(r"```python\n.*?```", fold, summary, flags=re.DOTALL)


def new_tests(plan: StepPlan) -> list[str]:
    """One line per test file this step's diff touches, with the classes it adds there (`plan.tests` also holds the
    classes of the earlier steps, in files this step may not touch)."""
    lines = []
    for path, names in sorted(plan.tests.items()):
        own = [name for name in names if name in plan.test_classes]
        if own:
            selectors = " ".join(f"{path}::{name}" for name in own)
            lines.append(f"- New in `{path}`: {', '.join(f'`{name}`' for name in own)} (`pytest {selectors}`).")
    return lines


def _ruff(ruff: RuffReport) -> str:
    if ruff.ok and not ruff.skipped:
        return f"clean (ruff {ruff.version})"
    return ruff.describe()


def lines_outside_details(text: str) -> int:
    """The lines a reviewer reads before unfolding anything (blank lines included)."""
    count, folded = 0, False
    for line in text.splitlines():
        if line.startswith("<details"):
            folded = True
        if not folded:
            count += 1
        if line.startswith("</details>"):
            folded = False
    return count
