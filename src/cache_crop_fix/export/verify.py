"""Stage 6: verify each step in an isolated venv (no `cache_crop_fix` in it).

For every step, its branch's tests (its own and those of the steps it is built on) must pass with transformers from its
branch; the step's own tests run against what its branch is built on too (the unpatched base for a pull request that
needs no other, the pull request it needs, or for a fork step the previous step of the stack), where at least one must
fail: that is what proves the step. So do the reproductions of its pull request text: with the step, each prints what
its comments announce; on the base, what they say the release prints. Those failures are counted by kind: behaviour (the test checks the cache's state)
or new API and wording (a keyword, a warning, a message: `Step.api_tests`).

The venv holds torch, pytest, parameterized and the optional quantization backends (optimum-quanto, hqq), so that the
quantized tests run on both sides. Each step's wheel is installed in its own folder, put first on `PYTHONPATH`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import xml.etree.ElementTree as ElementTree
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from ..targets.reproduction import check_reproduction, reproductions
from .base import Base
from .commit import StepCommit
from .plan import StepPlan
from .shell import ExportError, git, run


# The packages of the verification venv, at the versions of this environment
VENV_PACKAGES = ("torch", "pytest", "parameterized", "numpy", "optimum-quanto", "hqq", "setuptools")

# Runs in the verification venv: the seed issue's reproduction, the tests, then the reproductions of the step's pull
# request text (last: they may patch transformers), each in a fresh namespace, in one process
_DRIVER = """\
import contextlib, importlib.util, io, json, sys, warnings

import pytest
import torch
import transformers
from transformers import DynamicCache


def length_after(argument):
    key = torch.arange(3, dtype=torch.float32).reshape(1, 1, 3, 1)
    cache = DynamicCache()
    cache.update(key, key.clone(), layer_idx=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cache.crop(argument)
    return cache.get_seq_length()


with open(sys.argv[1], "w") as smoke:
    json.dump(
        {
            "transformers": transformers.__file__,
            "overlay_importable": importlib.util.find_spec("cache_crop_fix") is not None,
            "crop(0)": length_after(0),
            "crop(-5)": length_after(-5),
        },
        smoke,
    )
status = pytest.main(sys.argv[4:])
printed = {}
for script in json.loads(sys.argv[3]):
    output, error = io.StringIO(), None
    with contextlib.redirect_stdout(output):
        try:
            exec(compile(open(script).read(), script, "exec"), {"__name__": "__main__"})
        except Exception as exception:
            error = type(exception).__name__
    printed[script] = [output.getvalue().splitlines(), error]
with open(sys.argv[2], "w") as reproductions:
    json.dump(printed, reproductions)
sys.exit(status)
"""


@dataclass
class StepVerification:
    branch: str
    outcomes: dict[str, str]  # test id -> outcome with this step's wheel (its tests and every earlier step's)
    previous: dict[str, str]  # this step's test ids -> outcome on the previous step (the base for the first)
    kinds: dict[str, str]  # this step's test ids -> "behaviour" or "api"
    smoke: dict[str, dict] = field(default_factory=dict)  # "step" / "previous" -> the seed reproduction
    problems: list[str] = field(default_factory=list)
    # "step" / "previous" -> each reproduction of the pull request text -> [printed lines, exception name or None]
    reproductions: dict[str, dict[str, list]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.problems

    def passed(self) -> int:
        return sum(outcome == "passed" for outcome in self.outcomes.values())

    def skipped(self) -> int:
        return sum(outcome == "skipped" for outcome in self.outcomes.values())

    def fail_before(self, kind: str) -> tuple[int, int]:
        """How many of this step's tests of `kind` fail on the previous step, and how many there are."""
        ids = [test_id for test_id, test_kind in self.kinds.items() if test_kind == kind]
        return sum(self.previous.get(test_id) in ("failed", "error") for test_id in ids), len(ids)

    def failing_classes_before(self) -> dict[str, tuple[int, int]]:
        """Per test class of this step: failing on the previous step, total."""
        classes: dict[str, list[int]] = {}
        for test_id in self.kinds:
            counts = classes.setdefault(test_id.split("::")[1].split(".")[0], [0, 0])
            counts[0] += self.previous.get(test_id) in ("failed", "error")
            counts[1] += 1
        return {name: (failing, total) for name, (failing, total) in classes.items()}


@dataclass
class VerifyReport:
    steps: list[StepVerification]
    seconds: float
    phases: dict[str, float] = field(default_factory=dict)  # where the seconds went: "wheel", "tests", ...

    @property
    def ok(self) -> bool:
        return all(step.ok for step in self.steps)


def _requirement(name: str) -> str:
    try:
        return f"{name}=={metadata.version(name).split('+')[0]}"
    except metadata.PackageNotFoundError:
        return name


def ensure_venv(venv: Path, log: Callable[[str], None]) -> Path:
    python = venv / "bin" / "python"
    requirements = [_requirement(name) for name in VENV_PACKAGES]
    marker = venv / ".cache-crop-fix-requirements"
    if python.exists() and marker.exists() and marker.read_text().split() == requirements:
        return python
    if not python.exists():
        log(f"creating the isolated verification venv {venv}")
        run([sys.executable, "-m", "venv", "--clear", venv])
    log(f"installing {' '.join(requirements)} into it")
    run([python, "-m", "pip", "install", "--quiet", *requirements])
    marker.write_text("\n".join(requirements))
    # Installing them may have changed transformers' own dependencies (optimum-quanto pulls in a transformers)
    (venv / _DEPENDENCIES_MARKER).unlink(missing_ok=True)
    _build_quanto_kernels(python, venv, log)
    return python


_QUANTO_KERNELS = "from optimum.quanto.library.extensions.cpp import ext; print(ext.build_directory); ext.lib"


def _build_quanto_kernels(python: Path, venv: Path, log: Callable[[str], None]) -> None:
    """optimum-quanto compiles its CPU kernels on first use, in its own folder of the venv, behind a lock file: done
    once here, so that the parallel test runs do not wait on each other (or forever, on the lock of a build that was
    interrupted)."""
    log("building optimum-quanto's CPU kernels in the verification venv")
    found = run([python, "-c", _QUANTO_KERNELS.split("; ext.lib")[0]], check=False)
    if found.returncode == 0:
        (Path(found.stdout.strip()) / "lock").unlink(missing_ok=True)  # only this export uses this venv now
    built = run([python, "-c", _QUANTO_KERNELS], check=False)
    if built.returncode != 0:
        log(f"could not build optimum-quanto's kernels (its tests will fail): {built.stderr.strip()[-300:]}")


def _archive(repo: Path, commit: str, paths: Sequence[str], destination: Path) -> None:
    if destination.exists():
        shutil.rmtree(destination)
    destination.mkdir(parents=True)
    with tempfile.TemporaryDirectory() as tmp:
        archive = Path(tmp) / "tree.tar"
        git(repo, "archive", "--format=tar", "-o", str(archive), commit, "--", *paths)
        with tarfile.open(archive) as tar:
            tar.extractall(destination, filter="data")


def _source_step(repo: Path, commit: str, work_dir: Path) -> Path:
    """The `src/` folder of `commit` (reused while the commit is the same): transformers as an editable install runs
    it, in a fraction of a second where a wheel takes about 20."""
    site, marker = work_dir / "source", work_dir / "source.commit"
    if not (site.exists() and marker.exists() and marker.read_text() == commit):
        _archive(repo, commit, ["src/transformers"], site)
        marker.write_text(commit)
    return site / "src"


def _install_step(python: Path, repo: Path, commit: str, work_dir: Path, log: Callable[[str], None]) -> Path:
    """A wheel built from `commit`, installed in its own folder (reused while the commit is the same)."""
    site, marker = work_dir / "site", work_dir / "site.commit"
    if site.exists() and marker.exists() and marker.read_text() == commit:
        return site
    source, wheels = work_dir / "source", work_dir / "wheel"
    _archive(repo, commit, ["."], source)
    if wheels.exists():
        shutil.rmtree(wheels)
    run([python, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "-w", wheels, source])
    wheel = next(iter(sorted(wheels.glob("transformers-*.whl"))))
    if site.exists():
        shutil.rmtree(site)
    run([python, "-m", "pip", "install", "--quiet", "--no-deps", "--no-compile", "--target", site, wheel])
    shutil.rmtree(source)
    marker.write_text(commit)
    return site


_DEPENDENCIES_MARKER = ".cache-crop-fix-transformers-dependencies"


def _ensure_dependencies(python: Path, site: Path, venv: Path) -> None:
    """transformers' own dependencies (huggingface-hub, tokenizers, ...), from the top step's wheel metadata."""
    marker = venv / _DEPENDENCIES_MARKER
    dist_info = next(site.glob("transformers-*.dist-info"))
    requires = [
        line.split(":", 1)[1].strip()
        for line in (dist_info / "METADATA").read_text().splitlines()
        if line.startswith("Requires-Dist:") and "extra ==" not in line
    ]
    if marker.exists() and marker.read_text().split("\n") == requires:
        return
    if run([python, "-m", "pip", "install", "--quiet", *requires], check=False).returncode != 0:
        # A requirement the package index cannot serve (transformers 5.25 requires `kernels>=0.19.1`, which this project's
        # machines cannot install; transformers imports and runs without it): install the others one by one
        for requirement in requires:
            run([python, "-m", "pip", "install", "--quiet", requirement], check=False)
    marker.write_text("\n".join(requires))


def _junit_outcomes(report: Path) -> dict[str, str]:
    """`path::Class.test` -> passed, failed, error or skipped."""
    outcomes = {}
    for case in ElementTree.parse(report).getroot().iter("testcase"):
        *module, class_name = case.get("classname", "").split(".")
        test_id = f"{'/'.join(module)}.py::{class_name}.{case.get('name')}"
        children = {child.tag for child in case}
        outcome = "passed"
        for tag in ("error", "failure", "skipped"):
            if tag in children:
                outcome = {"error": "error", "failure": "failed", "skipped": "skipped"}[tag]
                break
        outcomes[test_id] = outcome
    return outcomes


@dataclass
class _Run:
    name: str
    tree: Path
    site: Path
    selection: list[str]
    work_dir: Path
    scripts: list[Path] = field(default_factory=list)  # the reproductions of the pull request text

    @property
    def printed(self) -> Path:
        return self.work_dir / f"reproductions-{self.name}.json"

    def start(self, python: Path, env: dict) -> subprocess.Popen:
        report, smoke = self.work_dir / f"junit-{self.name}.xml", self.work_dir / f"smoke-{self.name}.json"
        for path in (report, smoke, self.printed):
            path.unlink(missing_ok=True)
        pytest = [*self.selection, "-q", "-p", "no:cacheprovider", "-c", "pyproject.toml", "--rootdir", "."]
        scripts = json.dumps([str(script) for script in self.scripts])
        command = [python, "-c", _DRIVER, smoke, self.printed, scripts, *pytest, f"--junitxml={report}"]
        log_file = (self.work_dir / f"pytest-{self.name}.log").open("w")
        run_env = {**env, "PYTHONPATH": str(self.site)}
        return subprocess.Popen(
            [str(part) for part in command], cwd=self.tree, env=run_env, stdout=log_file, stderr=subprocess.STDOUT
        )

    def results(self) -> tuple[dict, dict[str, str]]:
        report, smoke = self.work_dir / f"junit-{self.name}.xml", self.work_dir / f"smoke-{self.name}.json"
        if not smoke.exists():
            output = (self.work_dir / f"pytest-{self.name}.log").read_text()[-3000:]
            raise ExportError(f"the verification run {self.name} failed before its tests:\n{output}")
        printed = json.loads(self.printed.read_text()) if self.printed.exists() else {}
        printed = {Path(script).name: value for script, value in printed.items()}
        return json.loads(smoke.read_text()), (_junit_outcomes(report) if report.exists() else {}), printed


def _write_reproductions(plan: StepPlan, step_dir: Path) -> list[Path]:
    """The reproductions of the step's pull request text (as the text shows them), as scripts in `step_dir`."""
    step_dir.mkdir(parents=True, exist_ok=True)
    for stale in step_dir.glob("reproduction-*.py"):
        stale.unlink()
    scripts = []
    for number, block in enumerate(reproductions(plan.step.summary), start=1):
        scripts.append(step_dir / f"reproduction-{number}.py")
        scripts[-1].write_text(block)
    return scripts


def verify_stack(
    base: Base,
    plans: Sequence[StepPlan],
    commits: Sequence[StepCommit],
    work_dir: Path,
    venv: Path,
    log: Callable[[str], None] = print,
    jobs: int = 2,
    seed_lengths: tuple[int, int] = (0, 0),
) -> VerifyReport:
    start = time.monotonic()
    python = ensure_venv(venv, log)
    repo = base.repo
    base_dir = work_dir / "base"
    if not (base_dir / "commit").exists() or (base_dir / "commit").read_text() != base.commit:
        _archive(repo, base.commit, ["src/transformers"], base_dir / "tree")
        (base_dir / "commit").write_text(base.commit)
    # Installed wheels are kept next to the venv, by commit: the commits are reproducible, so another export of the
    # same stack (e.g. the end-to-end test, in another build folder) reuses them
    wheel_cache = venv.parent / f"{venv.name}-wheels"
    # The steps run from their `src/` (what changes between them is a few files); the top of the stack, which people
    # install, runs from a wheel built from it, so that its packaging is checked too
    sites = {base.commit: base_dir / "tree" / "src"}
    for commit in commits[:-1]:
        sites[commit.commit] = _source_step(repo, commit.commit, wheel_cache / commit.commit[:16])
    for commit in commits:
        if commit.parent not in sites:  # the last pull request, on the stack under the first fork step
            sites[commit.parent] = _source_step(repo, commit.parent, wheel_cache / commit.parent[:16])
    log(f"building and installing the wheel of {commits[-1].branch} (the other steps run from their src/)")
    phases = {"venv and sources": time.monotonic() - start}
    sites[commits[-1].commit] = _install_step(
        python, repo, commits[-1].commit, wheel_cache / commits[-1].commit[:16], log
    )
    _ensure_dependencies(python, sites[commits[-1].commit], venv)
    phases["wheel"] = time.monotonic() - start - phases["venv and sources"]

    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env.update(PYTHONNOUSERSITE="1", PYTHONDONTWRITEBYTECODE="1", TRANSFORMERS_NO_ADVISORY_WARNINGS="1")
    runs = []
    for plan, commit in zip(plans, commits):
        step_dir = work_dir / commit.branch
        tree = step_dir / "tests"
        _archive(repo, commit.commit, [*plan.tests, "pyproject.toml"], tree)
        own = [f"{path}::{name}" for path, names in plan.tests.items() for name in names if name in plan.test_classes]
        scripts = _write_reproductions(plan, step_dir)
        runs.append(_Run("step", tree, sites[commit.commit], list(plan.tests), step_dir, scripts))
        runs.append(_Run("previous", tree, sites[commit.parent], own, step_dir, scripts))

    log(f"running the tests of {len(plans)} steps, each on its branch and on what its branch is built on")
    pending, active = list(runs), []
    while pending or active:
        while pending and len(active) < jobs:
            current = pending.pop(0)
            active.append((current, current.start(python, env)))
        time.sleep(0.2)
        active = [(current, process) for current, process in active if process.poll() is None]

    steps = []
    for index, plan in enumerate(plans):
        step_run, previous_run = runs[2 * index], runs[2 * index + 1]
        smoke_step, outcomes, printed_step = step_run.results()
        smoke_previous, previous, printed_previous = previous_run.results()
        kinds = {
            test_id: "api" if test_id.split("::")[1].split(".")[0] in plan.step.api_tests else "behaviour"
            for test_id in previous
        }
        result = StepVerification(
            commits[index].branch,
            outcomes,
            previous,
            kinds,
            {"step": smoke_step, "previous": smoke_previous},
            reproductions={"step": printed_step, "previous": printed_previous},
        )
        on_base = commits[index].parent == base.commit
        for script in step_run.scripts:
            code = script.read_text()
            result.problems += [
                f"{script.name}: {problem}"
                for problem in check_reproduction(
                    code, printed_step.get(script.name), printed_previous.get(script.name), base.version, on_base
                )
            ]
        for side, smoke, site in (
            ("step", smoke_step, step_run.site),
            ("previous", smoke_previous, previous_run.site),
        ):
            if not smoke["transformers"].startswith(str(site)):
                result.problems.append(f"the {side} run imported transformers from {smoke['transformers']}")
            if smoke["overlay_importable"]:
                result.problems.append(f"cache_crop_fix is importable in the {side} run: it is not isolated")
        if 1 in plan.on_branch and (smoke_step["crop(0)"], smoke_step["crop(-5)"]) != tuple(seed_lengths):
            result.problems.append(f"the seed reproduction gives {smoke_step['crop(0)']}, {smoke_step['crop(-5)']}")
        if not outcomes:
            result.problems.append("no test ran")
        failing = [test_id for test_id, outcome in outcomes.items() if outcome not in ("passed", "skipped")]
        if failing:
            result.problems.append(f"{len(failing)} test(s) fail with the step's wheel: {', '.join(failing[:8])}")
        if not any(outcome in ("failed", "error") for outcome in previous.values()):
            result.problems.append("none of the step's tests fails on the step before it: none proves it")
        steps.append(result)
    seconds = time.monotonic() - start
    phases[f"tests ({len(runs)} runs, {jobs} at a time)"] = seconds - sum(phases.values())
    return VerifyReport(steps, seconds, phases)
