"""Stage 2: plan the stack, step by step, from the target's table (`cache_crop_fix.targets.<target>.STEPS`).

Each step of the table becomes one commit of the stack (the fork branch): it transplants its overlay package
(`overlay/<target>/<step>/`) and adds its test classes (`Step.tests`) to upstream's test files. The upstream steps are
the pull requests of the series; the fork steps follow them, on the fork branch only. A pull request's own branch is
built on the base, after the changes of the pull requests it needs (`Step.needs`, and theirs; in a backport, every
earlier one), and holds their tests and its own. The plan checks, before anything is written, that the base
is the release the target was written for, that the fork steps come after the upstream ones, and that every test class
of our upstream-style tests belongs to exactly one step.
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..targets import Step, Target
from .base import BRANCH, Base
from .shell import ExportError, read_at
from .transplant import OverlayModule, TransplantError, check_base, parse_overlay, test_classes


@dataclass(frozen=True)
class StepPlan:
    number: int  # 1, 2, ...
    step: Step
    overlays: tuple[OverlayModule, ...]
    # upstream test path -> the test classes on this step's branch: its own and those of the steps it is built on
    tests: Mapping[str, tuple[str, ...]]
    # upstream test path -> the test classes on the stack after this step: its own and those of every earlier step
    stack_tests: Mapping[str, tuple[str, ...]]
    # The numbers of the pull requests this one's branch is built on (those it needs and theirs, in order; empty: the
    # base). A fork step is on the stack
    needs: tuple[int, ...] = ()
    on_branch: frozenset[int] = frozenset()  # the numbers of the steps whose changes this step's branch holds

    @property
    def branch(self) -> str:
        return f"{BRANCH}-{self.step.branch}"

    @property
    def upstream(self) -> bool:
        """Whether this step is a pull request of the upstream series (else it is on the fork branch only)."""
        return self.step.upstream

    @property
    def alone(self) -> bool:
        """Whether this step's branch is its own commit on the base (a pull request that needs no other)."""
        return self.upstream and not self.needs

    @property
    def test_classes(self) -> tuple[str, ...]:
        """The test classes this step adds (they prove it)."""
        return self.step.tests


@dataclass(frozen=True)
class Stack:
    target: Target
    base: Base
    steps: tuple[StepPlan, ...]
    test_sources: Mapping[str, str]  # upstream test path -> our full test module


def step_dirs(target: Target) -> list[Path]:
    """The overlay package of each step of `target`, in order."""
    return [Path(importlib.util.find_spec(package).origin).resolve().parent for package in target.step_packages()]


def load_overlay(overlay_dir: Path) -> list[OverlayModule]:
    """The overlay modules of one step (its folder mirrors `transformers/`; its `pr/` holds the step's text)."""
    paths = sorted(
        path
        for path in overlay_dir.rglob("*.py")
        if path.name != "__init__.py" and not {"__pycache__", "pr"} & set(path.relative_to(overlay_dir).parts)
    )
    return [parse_overlay(path.read_text(), path.relative_to(overlay_dir).as_posix()) for path in paths]


def exported_test_files(tests_dir: Path) -> list[str]:
    """
    Our upstream-style test files in `tests_dir` (`tests/<target>`, which mirrors upstream's `tests/`), as upstream
    paths: `tests/<target>/utils/test_x.py` is exported as `tests/utils/test_x.py`.
    """
    return sorted(
        "tests/" + path.relative_to(tests_dir).as_posix()
        for path in tests_dir.rglob("test_*.py")
        if path.parent != tests_dir and "fixtures" not in path.relative_to(tests_dir).parts
    )


def modular_counterpart(path: str) -> str | None:
    """`src/transformers/models/x/modular_x.py` for `src/transformers/models/x/modeling_x.py` (or `configuration_x.py`,
    which the modular file generates too), else `None`."""
    match = re.fullmatch(r"(src/transformers/models/[^/]+/)(?:modeling|configuration)_([^/]+\.py)", path)
    return f"{match.group(1)}modular_{match.group(2)}" if match else None


def plan_stack(
    target: Target,
    base: Base,
    project_root: Path,
    overlay_dirs: Sequence[Path] | None = None,
    fingerprints: Mapping[str, frozenset[str]] | None = None,
) -> Stack:
    """Checks the base and the table, and says what each step changes."""
    overlay_dirs = list(overlay_dirs) if overlay_dirs is not None else step_dirs(target)
    fingerprints = target.fingerprints if fingerprints is None else fingerprints
    if len(overlay_dirs) != len(target.steps):
        raise ExportError(
            f"{len(target.steps)} steps in the table of {target.name}, {len(overlay_dirs)} overlay folders"
        )
    problems = []
    kinds = [step.kind for step in target.steps]
    if "upstream" not in kinds or kinds != sorted(kinds, key=lambda kind: kind != "upstream"):
        problems.append(f"targets/{target.name}.py: the upstream steps must come first, the fork steps after them")
    if base.version is None or not target.supports(base.version):
        problems.append(
            f"the base is transformers {base.version or '(unknown version)'}, the fix is for {target.versions}"
        )
    overlays = []
    try:
        for overlay_dir in overlay_dirs:
            overlays.append(load_overlay(overlay_dir))
    except TransplantError as error:
        raise ExportError(str(error)) from error
    for module in (module for step_overlays in overlays for module in step_overlays):
        problems += check_base(read_at(base.repo, base.commit, module.target_path), module, fingerprints)
    if problems:
        raise ExportError(
            f"the base {base.commit[:12]} does not match what the fix expects; nothing was exported:\n  "
            + "\n  ".join(dict.fromkeys(problems))
        )

    tests_dir = project_root / "tests" / target.name
    test_sources = {
        path: (tests_dir / path.removeprefix("tests/")).read_text() for path in exported_test_files(tests_dir)
    }
    classes_in = {path: test_classes(source) for path, source in test_sources.items()}
    owners: dict[str, list[str]] = {}
    for step in target.steps:
        for name in step.tests:
            owners.setdefault(name, []).append(step.branch)
        for name in step.api_tests:
            if name not in step.tests:
                problems.append(f"step {step.branch}: `{name}` is in `api_tests` but not in `tests`")
    for path, names in classes_in.items():
        for name in names:
            if len(owners.get(name, [])) != 1:
                problems.append(
                    f"{path}: test class `{name}` belongs to {len(owners.get(name, []))} steps (it must be listed in "
                    f"the `tests` of exactly one step of targets/{target.name}.py)"
                )
    defined = {name for names in classes_in.values() for name in names}
    problems += [
        f"`Step.tests` names `{name}`, which no exported test file defines" for name in owners if name not in defined
    ]
    if problems:
        raise ExportError("the steps table and the tests do not match:\n  " + "\n  ".join(problems))

    needs = _needs(target)

    def classes_of(numbers: set[int]) -> dict[str, tuple[str, ...]]:
        names = {name for number in numbers for name in target.steps[number - 1].tests}
        tests = {path: tuple(name for name in classes if name in names) for path, classes in classes_in.items()}
        return {path: classes for path, classes in tests.items() if classes}

    steps = []
    for number, (step, step_overlays) in enumerate(zip(target.steps, overlays), start=1):
        stack = classes_of(set(range(1, number + 1)))
        on_branch = {number, *needs[number]} if step.upstream else set(range(1, number + 1))
        tests = classes_of(on_branch)
        steps.append(StepPlan(number, step, tuple(step_overlays), tests, stack, needs[number], frozenset(on_branch)))
    return Stack(target, base, tuple(steps), test_sources)


def _needs(target: Target) -> dict[int, tuple[int, ...]]:
    """For each step's number, the numbers of the pull requests its branch is built on, in order: those it names and
    theirs (a backport's: every earlier one). A fork step's branch is on the stack: none."""
    numbers = {step.branch: number for number, step in enumerate(target.steps, start=1)}
    needs: dict[int, tuple[int, ...]] = {}
    problems = []
    for number, step in enumerate(target.steps, start=1):
        if not step.upstream:
            needs[number] = ()
            if step.needs:
                problems.append(f"fork step {step.branch} names `needs`: it is on the stack, after every step")
            continue
        named = set(range(1, number)) if target.backport_of else set()
        for branch in step.needs:
            needed = numbers.get(branch)
            if needed is None or needed >= number or not target.steps[needed - 1].upstream:
                problems.append(f"step {step.branch} needs {branch!r}, which is not an earlier pull request")
            else:
                named |= {needed, *needs[needed]}
        needs[number] = tuple(sorted(named))
    if problems:
        raise ExportError(f"targets/{target.name}.py:\n  " + "\n  ".join(problems))
    return needs
