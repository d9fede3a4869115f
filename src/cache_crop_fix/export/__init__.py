"""Exports the fix as a stack of upstream-style pull requests on transformers: `make branch`.

The stages, one module each, in order:

1. `base`       get the base tree: a contributor's checkout (`--repo`), or the target's PyPI sdist made a git repo
2. `plan`       read the target's steps table: what each step (= pull request) changes, and which tests prove it
3. `transplant` write each step's overlay into upstream's modules and its test classes into upstream's tests (libcst)
4. `format`     ruff with the base's own settings; check that a step changes nothing but what it owns
5. `commit`     one commit and branch per step, on top of the previous one; one patch each in `dist/<target>/`
6. `verify`     a wheel per step in an isolated venv: its tests and the earlier steps' pass, its own fail before it
7. `pr_text`    one short pull request text per upstream step

Two deliveries come out of one target: the upstream series (the target's `upstream` steps: branches, patches, one mbox
and pull request texts) and the fork branch `fix-cache-crop` (the series, then the `fork` steps, then a commit that
versions it), which people install.

`utils/export_upstream_branch.py` (and `make branch`) is the entry point: `main` below.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..targets import TARGETS, Target, get_target, target_for
from .base import BRANCH, Base, base_version, get_base
from .commit import StepCommit, commit_step, contributor, finish_stack, stack_commit
from .format import RuffReport, apply_ruff, check_minimal
from .plan import StepPlan, modular_counterpart, plan_stack
from .pr_text import AI_CHECKBOX, commit_message, lines_outside_details, pr_text
from .shell import ExportError, git, read_at, write_if_changed
from .transplant import FileChange, TransplantError, transplant_step
from .verify import StepVerification, VerifyReport, verify_stack


PROJECT_ROOT = Path(__file__).resolve().parents[3]

__all__ = ["BRANCH", "ExportError", "ExportReport", "export", "main", "summary"]


@dataclass
class StepReport:
    plan: StepPlan
    commit: StepCommit
    changes: dict[str, FileChange]
    ruff: RuffReport
    notes: list[str]
    pr: Path | None  # the pull request text (`None` for a fork step)
    pr_lines: int  # outside `<details>`
    verification: StepVerification | None = None


@dataclass
class ExportReport:
    target: Target
    base: Base
    steps: list[StepReport]
    series: Path
    author: tuple[str, str]
    author_is_placeholder: bool
    verification: VerifyReport | None
    seconds: float
    verified_now: bool = True
    fork_version: str = ""  # the local version of the fork branch (`fix-cache-crop`): 5.14.1+cachecropfix.g<stack>

    @property
    def ok(self) -> bool:
        ruff_ok = all(step.ruff.ok for step in self.steps)
        return ruff_ok and (self.verification is None or self.verification.ok)


def export(
    target: Target | None = None,
    repo: Path | None = None,
    base: str | None = None,
    build_dir: Path = PROJECT_ROOT / "build",
    dist_dir: Path = PROJECT_ROOT / "dist",
    project_root: Path = PROJECT_ROOT,
    venv: Path | None = None,
    run_verify: bool = True,
    author: str | None = None,
    log: Callable[[str], None] = print,
    overlay_dirs: Sequence[Path] | None = None,
    fingerprints: Mapping[str, frozenset[str]] | None = None,
) -> ExportReport:
    """Builds (or finds up to date) the stack of `target`, writes its patches and pull request texts, and verifies
    every step (`run_verify`). Without `target`: the one that supports the checkout (`repo`), else the first one."""
    start = time.monotonic()
    if target is None:
        target = _target_of(repo) if repo is not None else TARGETS[0]
    first_branch = f"{BRANCH}-{target.steps[0].branch}"
    the_base = get_base(target, repo, base, build_dir / target.name, first_branch, log)
    stack = plan_stack(target, the_base, project_root, overlay_dirs, fingerprints)
    dist = dist_dir / target.name
    dist.mkdir(parents=True, exist_ok=True)
    identity, is_placeholder = contributor(the_base.repo, author)
    date = git(the_base.repo, "log", "-1", "--format=%cd", "--date=raw", the_base.commit).strip()
    pyproject = read_at(the_base.repo, the_base.commit, "pyproject.toml")
    setup_py = read_at(the_base.repo, the_base.commit, "setup.py")

    steps, stack_top, stack_sources, stacked = [], the_base.commit, {}, []
    chains: dict[tuple[int, ...], str] = {}  # the numbers of pull requests -> their changes in order, on the base

    def make_reader(sources: dict[str, str | None], commit: str) -> Callable[[str], str | None]:
        def read(path: str) -> str | None:
            if path not in sources:
                sources[path] = read_at(the_base.repo, commit, path)
            return sources[path]

        return read

    def changes_of(plan: StepPlan, tests, read) -> tuple[dict[str, FileChange], list[str], RuffReport]:
        try:
            changes, notes = transplant_step(plan.overlays, tests, stack.test_sources, read, modular_counterpart)
        except TransplantError as error:
            raise ExportError(f"step {plan.branch}: {error}") from error
        ruff = apply_ruff(changes, pyproject, setup_py)
        problems = check_minimal(changes)
        if problems:
            raise ExportError(f"step {plan.branch} would change more than it owns:\n  " + "\n  ".join(problems))
        return changes, notes, ruff

    for plan in stack.steps:
        message = commit_message(plan, len(stack.target.upstream_steps))
        changes, notes, ruff = changes_of(plan, plan.stack_tests, make_reader(stack_sources, the_base.commit))
        if plan.upstream:
            # On the stack (the fork branch), then on its own branch: the base, or the pull request it needs
            stack_top = stack_commit(the_base.repo, stack_top, changes, message, identity, date)
            # The stack's first commits are the changes of its first pull requests, each on the previous one
            chains[tuple(range(1, plan.number + 1))] = stack_top
            parent, classes = the_base.commit, set()
            for index, number in enumerate(plan.needs):  # the pull requests it needs, each on the previous one
                needed = stack.steps[number - 1]
                classes |= set(needed.test_classes)
                if plan.needs[: index + 1] not in chains:
                    needed_changes, _, _ = changes_of(needed, _restrict(plan.tests, classes), make_reader({}, parent))
                    needed_message = commit_message(needed, len(stack.target.upstream_steps))
                    chain = stack_commit(the_base.repo, parent, needed_changes, needed_message, identity, date)
                    chains[plan.needs[: index + 1]] = chain
                parent = chains[plan.needs[: index + 1]]
            own = changes  # on the commit the stack puts it on, with the same tests: the same change
            if parent != (stacked[-1] if stacked else the_base.commit) or plan.tests != plan.stack_tests:
                own, notes, ruff = changes_of(plan, plan.tests, make_reader({}, parent))
            commit = commit_step(the_base.repo, parent, own, message, plan.branch, identity, date, dist)
            _check_same_change(the_base.repo, plan, stacked[-1] if stacked else the_base.commit, stack_top, commit)
        else:
            commit = commit_step(the_base.repo, stack_top, changes, message, plan.branch, identity, date, dist)
            stack_top = commit.commit
        stacked.append(stack_top)
        stack_sources.update({path: change.source for path, change in changes.items()})
        pr = dist / f"PR-{plan.step.branch}.md"
        if not plan.upstream:
            pr.unlink(missing_ok=True)  # a fork step is no pull request (it may have been one in an earlier table)
        steps.append(StepReport(plan, commit, changes, ruff, notes, pr if plan.upstream else None, 0))
    _remove_stale_steps(the_base, dist, [step.commit.branch for step in steps], [s.pr for s in steps if s.pr], log)
    series, fork_version = finish_stack(
        the_base.repo,
        the_base.commit,
        stacked,
        len(stack.target.upstream_steps),
        dist,
        the_base.is_sdist,
        identity,
        date,
    )

    stored = build_dir / target.name / "verify" / "report.json"
    verification = None
    top = " ".join(step.commit.commit for step in steps)  # every branch (a pull request's is not on the stack)
    if run_verify:
        verification = verify_stack(
            the_base,
            stack.steps,
            [step.commit for step in steps],
            build_dir / target.name / "verify",
            venv or build_dir / "verify-venv",
            log,
            seed_lengths=target.seed_lengths,
        )
        stored.write_text(json.dumps({"commit": top, **dataclasses.asdict(verification)}, indent=1))
    elif stored.exists():
        # Without verification, the texts keep the results of the last one if it was for this very stack
        previous = json.loads(stored.read_text())
        if previous.pop("commit") == top:
            verification = VerifyReport([StepVerification(**step) for step in previous["steps"]], previous["seconds"])
    for index, step in enumerate(steps):
        step.verification = verification.steps[index] if verification else None
        if step.pr is None:
            continue
        text = pr_text(step.plan, stack.steps, step.commit, step.ruff, step.verification, the_base, stack.target)
        write_if_changed(step.pr, text)
        step.pr_lines = lines_outside_details(text)
    return ExportReport(
        target,
        the_base,
        steps,
        series,
        identity,
        is_placeholder,
        verification,
        time.monotonic() - start,
        run_verify,
        fork_version,
    )


def _restrict(tests: Mapping[str, tuple[str, ...]], classes: set[str]) -> dict[str, tuple[str, ...]]:
    """`tests` with only the test classes in `classes`."""
    kept = {path: tuple(name for name in names if name in classes) for path, names in tests.items()}
    return {path: names for path, names in kept.items() if names}


def _check_same_change(repo: Path, plan: StepPlan, stack_parent: str, stack_top: str, commit: StepCommit) -> None:
    """A pull request's branch must change the code as its commit on the stack does: else it carries (or lacks) a
    change of an earlier pull request, which it must then name in `Step.needs`."""

    def changed_lines(parent: str, child: str) -> dict[str, list[str]]:
        files: dict[str, list[str]] = {}
        for line in git(repo, "diff", "-U0", "--no-color", parent, child, "--", "src").splitlines():
            if line.startswith("diff --git"):
                lines = files.setdefault(line.split(" b/")[-1], [])
            elif not line.startswith(("index ", "@@", "---", "+++")):
                lines.append(line)
        return files

    on_stack, alone = changed_lines(stack_parent, stack_top), changed_lines(commit.parent, commit.commit)
    differing = sorted(path for path in on_stack.keys() | alone.keys() if on_stack.get(path) != alone.get(path))
    if differing:
        on = "the base" if plan.alone else "the pull requests it needs"
        raise ExportError(
            f"step {plan.branch} changes {', '.join(differing)} on {on} otherwise than on the stack: it builds on a "
            "change of an earlier pull request; name that one in its `needs` (targets/<target>.py), or move the change"
        )


def _remove_stale_steps(base: Base, dist: Path, branches: list[str], texts: list[Path], log: Callable) -> None:
    """Removes the patches and pull request texts of steps this stack no longer has (a step renamed or removed from
    the table), and in a build folder of ours their branches: they would be taken for this stack's."""
    current = {f"{branch}.patch" for branch in branches} | {text.name for text in texts}
    for stale in sorted([*dist.glob("PR-*.md"), *dist.glob(f"{BRANCH}-[0-9]*.patch")]):
        if stale.name not in current:
            stale.unlink()
    listed = git(base.repo, "for-each-ref", "--format=%(refname:short)", f"refs/heads/{BRANCH}-[0-9]*").split()
    stale_branches = [branch for branch in listed if branch not in branches]
    if stale_branches and base.is_sdist:
        git(base.repo, "branch", "-D", *stale_branches)
        log(f"removed the branches of steps this stack no longer has: {', '.join(stale_branches)}")
    elif stale_branches:
        # A checkout's branches are its owner's (they may back open pull requests)
        log(f"branches of steps this stack no longer has, left as they are: {', '.join(stale_branches)}")


def _target_of(repo: Path) -> Target:
    repo = Path(repo).resolve()
    version = base_version(repo, "HEAD") if (repo / ".git").exists() else None
    target = target_for(version) if version else None
    if target is None:
        raise ExportError(f"{repo} holds transformers {version or '(unknown version)'}: no target supports it")
    return target


def summary(report: ExportReport) -> str:
    base = report.base
    lines = [f"{report.target.label}: stack of {len(report.steps)} in {base.repo} on {base.description}"]
    for step in report.steps:
        commit = step.commit
        state = "new" if commit.created else "up to date"
        line = (
            f"  {step.plan.step.kind:<8} {commit.branch:<28} {commit.commit[:10]} ({state}) {len(commit.files)} files "
            f"code +{commit.code[0]}/-{commit.code[1]}, tests +{commit.test_added}/-{commit.test_removed}"
            + (f" ({commit.new_test_headers} of them new files' headers)" if commit.new_test_headers else "")
            + f", ruff {'clean' if step.ruff.ok else 'FAILED'}"
        )
        if step.verification is not None:
            verification = step.verification
            behaviour, api = verification.fail_before("behaviour"), verification.fail_before("api")
            line += (
                f", {verification.passed()}/{len(verification.outcomes)} pass"
                + (f" ({verification.skipped()} skipped)" if verification.skipped() else "")
                + f", fail before: {behaviour[0]}/{behaviour[1]} behaviour, {api[0]}/{api[1]} API/wording"
                + ("" if verification.ok else " -- FAILED")
            )
        lines.append(line)
    for step in report.steps:
        lines += [f"  note ({step.commit.branch}): {note}" for note in step.notes]
        if not step.ruff.ok:
            lines.append(f"  ruff ({step.commit.branch}): {step.ruff.describe()}")
        if step.verification is not None:
            lines += [f"  problem ({step.commit.branch}): {problem}" for problem in step.verification.problems]
    dist = report.series.parent
    upstream = [step for step in report.steps if step.pr is not None]
    lines += [
        f"patches: {dist}/{BRANCH}-<step>.patch; the upstream series ({len(upstream)} pull requests): "
        f"{dist}/{BRANCH}-upstream.patch; the fork branch's steps: {report.series}",
        f"pull request texts: {dist}/PR-<step>.md ({max(step.pr_lines for step in upstream)} lines at most "
        "outside <details>)",
        f"author: {report.author[0]} <{report.author[1]}>"
        + (
            " -- a PLACEHOLDER: set git config user.name/user.email or pass --author"
            if report.author_is_placeholder
            else ""
        ),
        f"before opening each pull request: tick (or not) `{AI_CHECKBOX[6:]}` yourself, in its text",
    ]
    if report.base.is_sdist:
        lines.append(
            "this stack is built on the PyPI sdist (no upstream tests): its patches are for `pip install`; make the "
            "pull requests with --repo on a transformers checkout"
        )
    if report.verification is not None:
        when = f"{report.verification.seconds:.0f} s" if report.verified_now else "not run now: the last one"
        if report.verified_now and report.verification.phases:
            when += ": " + ", ".join(
                f"{phase} {seconds:.0f} s" for phase, seconds in report.verification.phases.items()
            )
        lines.append(f"verification ({when}): " + ("OK" if report.verification.ok else "FAILED"))
    lines += [
        f"fork branch {BRANCH}: the series, {len(report.steps) - len(upstream)} fork step(s) and one commit that versions "
        f"it transformers {report.fork_version}",
        f'install the top of the stack: pip install "git+file://{base.repo}@{BRANCH}"',
        f"total: {report.seconds:.0f} s",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", type=Path, help="a transformers git checkout (default: the target's PyPI sdist)")
    parser.add_argument(
        "--target",
        choices=[target.name for target in TARGETS],
        help="default: the one that supports --repo, else every target",
    )
    parser.add_argument("--base", help="the commit to build on (default: the parent of the stack, else HEAD)")
    parser.add_argument("--author", help='"Name <email>" for the commits (default: git config user.name/email)')
    parser.add_argument("--build-dir", type=Path, default=PROJECT_ROOT / "build")
    parser.add_argument("--dist-dir", type=Path, default=PROJECT_ROOT / "dist")
    parser.add_argument("--venv", type=Path, help="the verification venv (default: BUILD_DIR/verify-venv)")
    parser.add_argument("--no-verify", action="store_true", help="skip building and testing the wheels")
    args = parser.parse_args(argv)
    if args.target:
        targets = [get_target(args.target)]
    elif args.repo:
        targets = [None]
    else:
        targets = list(TARGETS)
    status = 0
    for target in targets:
        try:
            report = export(
                target=target,
                repo=args.repo,
                base=args.base,
                build_dir=args.build_dir.resolve(),
                dist_dir=args.dist_dir.resolve(),
                venv=args.venv.resolve() if args.venv else None,
                run_verify=not args.no_verify,
                author=args.author,
            )
        except ExportError as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
        print(summary(report))
        status = status or (0 if report.ok else 1)
    return status
