"""The torch and Python versions users have: `make matrix` (`nox`), not part of `make test`.

Session `matrix`: the exported upstream-style tests of the target of the transformers release (`tests/<target>/`) and the
end-to-end generation tests (`tests/test_generation*.py`) with the runtime fix, for each combination of Python, torch and
transformers in `COMBINATIONS` (every target has at least one). Session `fork`: a target's exported tests against a
wheel of its fork branch (`make branch`), without the runtime fix; it skips when `build/` holds no branch.

Environments are made by uv (nox's `uv` backend). uv reads neither pip's configuration nor its constraint file, so the
package locations and the constraint pip is configured with (`pip config list`, `PIP_FIND_LINKS`, ...) are handed to
uv: on machines with local wheels (a CPU build of torch, say) uv takes them from there as pip would, and a torch cap
is honoured as pip honours it.
"""

import glob
import os
import shutil
import sys
from pathlib import Path

import nox


sys.path.insert(0, str(Path(__file__).resolve().parent / "utils"))
from uv_pip import uv_environment  # noqa: E402


ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT / "src"))
from cache_crop_fix.targets import TARGETS, target_for  # noqa: E402


BRANCH = "fix-cache-crop"

# (Python, torch, transformers). 3.10 is the oldest Python `requires-python` allows, 3.13 the newest measured; torch
# 2.13.0 is the pinned development version, 2.14.1 the newest release pip's cap allows on the development machines.
COMBINATIONS = [
    ("3.11", "2.13.0", "5.14.1"),
    ("3.11", "2.14.1", "5.14.1"),
    ("3.10", "2.14.1", "5.14.1"),
    ("3.12", "2.14.1", "5.14.1"),
    ("3.13", "2.14.1", "5.14.1"),
    ("3.11", "2.13.0", "5.14.0"),  # the oldest transformers the package accepts
    ("3.11", "2.13.0", "5.24.0"),
    ("3.11", "2.13.0", "5.25.0"),
    ("3.12", "2.14.1", "5.25.0"),
]
# Releases whose requirements the package index here cannot all serve (5.25.0 requires `kernels>=0.19.1`): installed
# with `--no-deps`, next to the requirements listed in this file (as `make` does)
NO_DEPS = {"5.25.0": ROOT / "requirements-v5_25.txt"}
# What the tests import besides torch and transformers (the quantized-backend tests skip without the backends)
TEST_REQUIREMENTS = ["pytest==9.*", "parameterized", "hypothesis", "optimum-quanto==0.2.7", "hqq==0.2.8.post1"]
GENERATION_TESTS = sorted(str(path.relative_to(ROOT)) for path in ROOT.glob("tests/test_generation*.py"))
# 5.25's own end-to-end tests (hybrid and SSM main models); the others are written for the 5.14 and 5.24 contracts (an
# update-level state history, assistant caches rolled back through `remove_from_pkv`), which 5.25 replaced
TARGET_GENERATION_TESTS = {"v5_25": ["tests/test_generation_main_hybrid.py"]}

nox.options.default_venv_backend = "uv"
nox.options.sessions = ["matrix", "fork"]
nox.options.reuse_existing_virtualenvs = True


def _python(version: str) -> str:
    """The interpreter for `version`: on PATH, or one of pyenv's (whose shims run only the selected versions)."""
    for candidate in sorted(glob.glob(os.path.expanduser(f"~/.pyenv/versions/{version}.*/bin/python{version}"))):
        return candidate
    found = shutil.which(f"python{version}")
    return found or version


os.environ.update(uv_environment())


def _install(session: nox.Session, torch_version: str, transformers_requirement: str, *extra: str) -> None:
    version = transformers_requirement.partition("==")[2]
    if version in NO_DEPS:
        requirements = [
            line.split("#")[0].strip()
            for line in NO_DEPS[version].read_text().splitlines()
            if line.split("#")[0].strip() and not line.startswith("torch")
        ]
        session.install(f"torch=={torch_version}", *requirements, *TEST_REQUIREMENTS)
        session.install("--no-deps", transformers_requirement, *extra)
    else:
        session.install(f"torch=={torch_version}", transformers_requirement, *TEST_REQUIREMENTS, *extra)
    session.run(
        "python",
        "-c",
        "import sys, torch, transformers; print(sys.version, torch.__version__, transformers.__version__)",
    )


@nox.session
@nox.parametrize(
    "python,torch_version,transformers_version",
    [(_python(python), torch_version, transformers) for python, torch_version, transformers in COMBINATIONS],
    ids=[
        f"py{python}-torch{torch_version}-transformers{transformers}"
        for python, torch_version, transformers in COMBINATIONS
    ],
)
def matrix(session: nox.Session, torch_version: str, transformers_version: str) -> None:
    """The exported and the end-to-end generation tests with the runtime fix (tests/conftest.py applies it)."""
    _install(session, torch_version, f"transformers=={transformers_version}", ".")
    target = target_for(transformers_version).name
    generation_tests = TARGET_GENERATION_TESTS.get(target, GENERATION_TESTS)
    session.run(
        "python",
        "-m",
        "pytest",
        f"tests/{target}",
        *generation_tests,
        "-q",
        "-p",
        "no:cacheprovider",
        *session.posargs,
    )


@nox.session(python=_python("3.11"))
@nox.parametrize("target", [target.name for target in TARGETS], ids=[target.name for target in TARGETS])
def fork(session: nox.Session, target: str) -> None:
    """A target's exported tests against its fork branch's wheel (no runtime fix), away from this project's conftest."""
    sdist_version = next(t.sdist_version for t in TARGETS if t.name == target)
    branch_repo = ROOT / "build" / target / f"transformers-{sdist_version}"
    if not (branch_repo / ".git").exists():
        session.skip(f"no fork branch in {branch_repo.relative_to(ROOT)}: run `make branch` first")
    transformers_requirement = f"transformers @ git+file://{branch_repo}@{BRANCH}"
    if sdist_version in NO_DEPS:
        _install(session, "2.13.0", f"transformers=={sdist_version}")
        session.install("--no-deps", "--reinstall-package", "transformers", transformers_requirement)
    else:
        _install(session, "2.13.0", transformers_requirement, "--reinstall-package", "transformers")
    exported_tests = f"tests/{target}"
    tests = Path(session.create_tmp()) / "exported"
    shutil.rmtree(tests, ignore_errors=True)
    shutil.copytree(ROOT / exported_tests, tests / exported_tests)
    (tests / "tests" / "__init__.py").touch()
    (tests / "pytest.ini").write_text("[pytest]\n")
    session.run(
        "python", "-c", "import importlib.util, sys; sys.exit(importlib.util.find_spec('cache_crop_fix') is not None)"
    )
    with session.chdir(tests):
        session.run(
            "python",
            "-m",
            "pytest",
            exported_tests,
            "-q",
            "-p",
            "no:cacheprovider",
            "-c",
            "pytest.ini",
            *session.posargs,
        )
