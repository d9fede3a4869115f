"""`drift`, `new-target` and the fork branch's local version, offline: on small fabricated transformers "releases"
(a wheel and an sdist built here), so that CI needs no network."""

import dataclasses
import io
import shutil
import subprocess
import sys
import tarfile
import textwrap
import zipfile
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from cache_crop_fix import drift, new_target
from cache_crop_fix.drift.methods import CHANGED, GONE, SAME
from cache_crop_fix.drift.release import DriftError, Release
from cache_crop_fix.drift.stacks import APPLIES, FAILS, NOT_BUILT
from cache_crop_fix.export.fork_version import local_version, versioned_sources
from cache_crop_fix.export.transplant import method_fingerprints
from cache_crop_fix.targets import get_target, target_for


SRC = Path(__file__).resolve().parents[1] / "src"

OLD_CACHE_UTILS = textwrap.dedent(
    """\
    class CacheLayerMixin:
        def crop(self, tokens_to_remove):
            raise NotImplementedError


    class DynamicLayer(CacheLayerMixin):
        def crop(self, tokens_to_remove):
            self.keys = self.keys[..., :tokens_to_remove, :]

        def reset(self):
            self.keys = None


    class Cache:
        def crop(self, tokens_to_remove):
            for layer in self.layers:
                layer.crop(tokens_to_remove)
    """
)
# 5.91: `DynamicLayer.crop` clamps, `DynamicLayer.reset` is gone
NEW_CACHE_UTILS = (
    OLD_CACHE_UTILS.replace(
        "self.keys = self.keys[..., :tokens_to_remove, :]",
        "self.keys = self.keys[..., : max(self.keys.shape[-2] + tokens_to_remove, 0), :]",
    )
    .replace("    def reset(self):\n        self.keys = None\n\n", "")
    .replace("\n\n\nclass Cache", "\n\nclass Cache")
)
OLD_GENERATION = "def generate(cache):\n    return cache\n"
NEW_GENERATION = "def generate(cache):\n    cache.crop(-1)\n    return cache\n"
NEW_TOY_MODEL = textwrap.dedent(
    """\
    from ...cache_utils import DynamicLayer


    class ToyLayer(DynamicLayer):
        pass
    """
)


def _wheel(folder: Path, version: str, files: dict[str, str]) -> Path:
    path = folder / f"transformers-{version}-py3-none-any.whl"
    folder.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as archive:
        for name, text in {"transformers/__init__.py": f'__version__ = "{version}"\n', **files}.items():
            archive.writestr(name, text)
        archive.writestr(f"transformers-{version}.dist-info/METADATA", f"Name: transformers\nVersion: {version}\n")
    return path


def _sdist(folder: Path, version: str, files: dict[str, str]) -> Path:
    path = folder / f"transformers-{version}.tar.gz"
    folder.mkdir(parents=True, exist_ok=True)
    top = f"transformers-{version}"
    contents = {
        "PKG-INFO": f"Name: transformers\nVersion: {version}\n",
        "setup.py": f'setup(\n    version="{version}",\n)\n',
        "src/transformers/__init__.py": f'__version__ = "{version}"\n',
        **{f"src/{name}": text for name, text in files.items()},
    }
    with tarfile.open(path, "w:gz") as archive:
        for name, text in contents.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{top}/{name}")
            info.size, info.mtime = len(data), 1_700_000_000
            archive.addfile(info, io.BytesIO(data))
    return path


def _git(repo: Path, *args: str, input: str | None = None) -> str:
    command = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args]
    return subprocess.run(command, check=True, capture_output=True, text=True, input=input).stdout


def _patch(tmp_path: Path, before: str, after: str, name: str) -> str:
    """A `git format-patch` of `src/transformers/cache_utils.py` from `before` to `after`."""
    repo = tmp_path / f"patch-{name}"
    (repo / "src/transformers").mkdir(parents=True)
    _git(repo, "init", "-q")
    (repo / "src/transformers/cache_utils.py").write_text(before)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "base")
    (repo / "src/transformers/cache_utils.py").write_text(after)
    _git(repo, "commit", "-q", "-am", name)
    return _git(repo, "format-patch", "-1", "--stdout")


@pytest.fixture
def releases(tmp_path):
    """5.90.0 (the toy target's release, in the cache) and 5.91.0 (the new one, given as local files), a toy target
    on 5.90 with the v5_25 stack's steps, and that stack's patches: the first applies to 5.91, the second does not."""
    cache = tmp_path / "cache"
    old_files = {"transformers/cache_utils.py": OLD_CACHE_UTILS, "transformers/generation/utils.py": OLD_GENERATION}
    new_files = {
        "transformers/cache_utils.py": NEW_CACHE_UTILS,
        "transformers/generation/utils.py": NEW_GENERATION,
        "transformers/models/toy/modeling_toy.py": NEW_TOY_MODEL,
    }
    _wheel(cache / "5.90.0", "5.90.0", old_files)
    wheel = _wheel(tmp_path / "files", "5.91.0", new_files)
    sdist = _sdist(tmp_path / "files", "5.91.0", new_files)
    fingerprints = method_fingerprints(OLD_CACHE_UTILS, "transformers.cache_utils")
    main_line = get_target("v5_25")
    target = dataclasses.replace(
        main_line,
        steps=main_line.steps[:2],  # its first two pull requests: clamp, then the next
        versions=">=5.90.0,<5.91",
        sdist_version="5.90.0",
        fingerprints={name: frozenset({digest}) for name, digest in fingerprints.items()},
    )
    dist = tmp_path / "dist"
    (dist / "v5_25").mkdir(parents=True)
    applies = _patch(tmp_path, NEW_CACHE_UTILS, NEW_CACHE_UTILS + "\n\nCLAMPED = True\n", "clamp")
    fails = _patch(tmp_path, OLD_CACHE_UTILS, OLD_CACHE_UTILS.replace("self.keys = None", "del self.keys"), "history")
    first, second = (f"fix-cache-crop-{step.branch}.patch" for step in target.steps)
    (dist / "v5_25" / first).write_text(applies)
    (dist / "v5_25" / second).write_text(fails)
    return {"cache": cache, "wheel": wheel, "sdist": sdist, "target": target, "dist": dist}


def _drift(releases, **kwargs):
    options = {
        "target": releases["target"],
        "cache_dir": releases["cache"],
        "dist_dir": releases["dist"],
        "wheel": releases["wheel"],
        "sdist": releases["sdist"],
        "log": lambda line: None,
    }
    return drift.drift("5.91.0", **{**options, **kwargs})


def test_drift_reports_methods_classes_call_sites_and_stacks(releases):
    report = _drift(releases)
    states = {method.qualname.removeprefix("transformers.cache_utils."): method.state for method in report.methods}
    assert states == {
        "Cache.crop": SAME,
        "CacheLayerMixin.crop": SAME,
        "DynamicLayer.crop": CHANGED,
        "DynamicLayer.reset": GONE,
    }
    diff = report.diff_file.read_text()
    assert "-    self.keys = self.keys[..., :tokens_to_remove, :]" in diff
    assert "+++ 5.91.0/cache_utils.DynamicLayer.crop" in diff
    assert [(cls.path, cls.name) for cls in report.new_layers] == [
        ("transformers/models/toy/modeling_toy.py", "ToyLayer")
    ]
    assert [(site.path, site.scope, site.code) for site in report.new_calls] == [
        ("transformers/generation/utils.py", "generate", "cache.crop(-1)")
    ]
    stacks = {stack.target: [patch.state for patch in stack.patches] for stack in report.stacks}
    assert stacks == {
        "v5_25": [APPLIES, FAILS],
        "v5_24": [NOT_BUILT] * len(get_target("v5_24").steps),
        "v5_14": [NOT_BUILT] * len(get_target("v5_14").steps),
    }
    assert report.changes() == [
        "1 replaced method changed",
        "1 replaced method gone",
        "1 new cache layer classes",
        "1 new call sites",
        "the v5_25 stack does not apply",
    ]
    text = (releases["cache"] / "5.91.0" / "v5_25-report.txt").read_text()
    assert "v5_25: 1/2 apply" in text and "v5_24: not built" in text and text.endswith("does not apply\n")


def test_drift_of_the_target_release_itself_finds_nothing(releases, tmp_path):
    old = {"transformers/cache_utils.py": OLD_CACHE_UTILS, "transformers/generation/utils.py": OLD_GENERATION}
    sdist = _sdist(tmp_path / "same", "5.90.0", old)
    first, second = (f"fix-cache-crop-{step.branch}.patch" for step in releases["target"].steps)
    (releases["dist"] / "v5_25" / first).write_text(
        _patch(tmp_path, OLD_CACHE_UTILS, OLD_CACHE_UTILS + "\nCLAMPED = True\n", "one")
    )
    (releases["dist"] / "v5_25" / second).write_text(
        _patch(tmp_path, OLD_CACHE_UTILS + "\nCLAMPED = True\n", OLD_CACHE_UTILS + "\nCLAMPED = 1\n", "two")
    )
    wheel = releases["cache"] / "5.90.0" / "transformers-5.90.0-py3-none-any.whl"
    report = drift.drift(
        "5.90.0",
        releases["target"],
        releases["cache"],
        releases["dist"],
        wheel,
        sdist,
        log=lambda line: None,
    )
    assert {method.state for method in report.methods} == {SAME}
    assert report.new_layers == report.new_calls == [] and report.changes() == []
    assert "verdict: nothing changed for the target" in drift.render(report)


def test_drift_command_exit_status(releases, capsys):
    files = ["--wheel", str(releases["wheel"]), "--sdist", str(releases["sdist"])]
    places = ["--cache-dir", str(releases["cache"]), "--dist-dir", str(releases["dist"])]
    # Against the real v5_25 table, the fabricated release lacks every method it replaces: something changed
    assert drift.main(["5.91.0", "--against", "v5_25", *files, *places]) == 1
    out = capsys.readouterr().out
    assert "gone     cache_utils.LinearAttentionLayer.update_conv_state" in out and "verdict: CHANGED" in out
    # It cannot tell: a missing file, or not a version
    assert drift.main(["5.91.0", "--wheel", "/nonexistent.whl", "--sdist", str(releases["sdist"]), *places]) == 2
    assert drift.main(["five", *files, *places]) == 2
    assert "cannot tell" in capsys.readouterr().err


def test_nearest_target_and_clear_errors():
    assert drift.nearest_target("5.14.1")[0].name == "v5_14"
    assert drift.nearest_target("5.23.0")[0].name == "v5_24"  # nearer to 5.24 than to 5.14
    assert drift.nearest_target("5.26.0")[0].name == "v5_25"
    assert drift.nearest_target("5.16.0")[0].name == "v5_14"
    with pytest.raises(TypeError, match="Target.*not str"):
        drift.drift("5.25.0", target="v5_24")
    with pytest.raises(TypeError, match="pathlib.Path, not str"):
        Release("5.25.0", "transformers.whl")
    with pytest.raises(DriftError, match="not a version"):
        drift.drift("latest")


def test_new_target_adds_files_that_status_and_tests_pick_up(releases, tmp_path):
    root = tmp_path / "project"
    shutil.copytree(SRC, root / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for name in ("requirements-v5_25.txt", "requirements-v5_25-nodeps.txt"):
        shutil.copyfile(SRC.parent / name, root / name)
    # The placeholder test takes its license header from the nearest target's tests
    (root / "tests/v5_25/utils").mkdir(parents=True)
    shutil.copyfile(
        SRC.parent / "tests/v5_25/utils/test_cache_utils.py", root / "tests/v5_25/utils/test_cache_utils.py"
    )
    source = get_target("v5_25")
    release = Release("5.26.0", _wheel(tmp_path / "files", "5.26.0", {"transformers/cache_utils.py": NEW_CACHE_UTILS}))
    written, gone = new_target.create_target(release, source, root)
    relative = sorted(str(path.relative_to(root)) for path in written)
    assert relative == sorted(
        [
            "src/cache_crop_fix/targets/v5_26.py",
            "src/cache_crop_fix/overlay/v5_26/__init__.py",
            "src/cache_crop_fix/audit/v5_26.py",
            "tests/v5_26/__init__.py",
            "tests/v5_26/utils/__init__.py",
            "tests/v5_26/utils/test_cache_utils.py",
            "requirements-v5_26.txt",
            "requirements-v5_26-nodeps.txt",
            *(f"src/cache_crop_fix/overlay/v5_26/{step.package}/__init__.py" for step in source.steps),
            # Each step's pull request text and reproductions, to be checked against the new release
            *(
                f"src/cache_crop_fix/overlay/v5_26/{step.package}/pr/{path.name}"
                for step in source.steps
                for path in step.pr_folder.iterdir()
            ),
        ]
    )
    assert (root / "requirements-v5_26-nodeps.txt").read_text().endswith("\ntransformers==5.26.0\n")
    assert "(.venv-v5_26, made by" in (root / "requirements-v5_26.txt").read_text()
    assert "transformers.cache_utils.LinearAttentionLayer.update_conv_state" in gone
    table = (root / "src/cache_crop_fix/targets/v5_26.py").read_text()
    assert "#   transformers.cache_utils.LinearAttentionLayer.update_conv_state" in table
    assert 'versions=">=5.26.0,<5.27"' in table and "backport_of" not in table.split("TARGET = Target(")[1]
    with pytest.raises(FileExistsError, match="exists already"):
        new_target.create_target(release, source, root)

    # A fake transformers 5.26.0 first on the path: `status` finds the new target by its table
    fake = tmp_path / "fake"
    (fake / "transformers").mkdir(parents=True)
    (fake / "transformers" / "__init__.py").write_text('__version__ = "5.26.0"\n')
    (fake / "transformers" / "cache_utils.py").write_text(NEW_CACHE_UTILS)
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{fake}:{root / 'src'}", "PYTHONNOUSERSITE": "1"}
    status = subprocess.run(
        [sys.executable, "-m", "cache_crop_fix", "status"], capture_output=True, text=True, env=env, cwd=tmp_path
    )
    assert "transformers:  5.26.0 (supported; target v5_26, the 5.26 main line)" in status.stdout, status.stderr
    fingerprints = subprocess.run(
        [
            sys.executable,
            "-c",
            "from cache_crop_fix.targets import get_target; print(dict(get_target('v5_26').fingerprints))",
        ],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    ).stdout
    expected = method_fingerprints(NEW_CACHE_UTILS, "transformers.cache_utils")["transformers.cache_utils.Cache.crop"]
    assert f"'transformers.cache_utils.Cache.crop': frozenset({{'{expected}'}})" in fingerprints

    # The placeholder test runs (on the installed transformers)
    tests = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(root / "tests/v5_26/utils")],
        capture_output=True,
        text=True,
        cwd=root,
    )
    assert tests.returncode == 0 and "1 passed" in tests.stdout, tests.stdout[-2000:]


def test_fork_local_version_is_pep440_and_matches_its_release():
    version = local_version("5.14.1", "0123456789abcdef0123")
    assert version == "5.14.1+cachecropfix.g0123456789"
    assert str(Version(version)) == version  # written as PEP 440 normalizes it (an all-digit sha would not be)
    assert Version(version).public == "5.14.1" and Version(version).local == "cachecropfix.g0123456789"
    assert SpecifierSet("==5.14.1").contains(version) and SpecifierSet(">=5.14.0,<5.15").contains(version)
    assert not SpecifierSet("==5.14.1+other").contains(version)
    assert target_for(version).name == "v5_14"
    # transformers' own checks compare `packaging` versions: ordering (`check_min_version`, `require_version(">=")`,
    # the deprecation cut-offs) treats the fork as its release; only a strict `require_version("transformers==5.14.1")`
    # (`operator.eq`, unlike pip's `==`) tells them apart
    from transformers.utils.versions import _compare_versions

    for op, wanted in ((">=", "5.14.0"), ("<", "5.15.0"), (">=", "5.14.1")):
        _compare_versions(op, version, wanted, f"transformers{op}{wanted}", "transformers", "")
    assert not Version(version) < Version("5.14.1")  # check_min_version("5.14.1") accepts it
    with pytest.raises(ImportError, match="transformers==5.14.1 is required"):
        _compare_versions("==", version, "5.14.1", "transformers==5.14.1", "transformers", "")
    # A local version already there is replaced, not stacked
    assert local_version("5.14.1+cachecropfix.gaaaaaaaaaa", "b" * 40) == "5.14.1+cachecropfix.gbbbbbbbbbb"
    with pytest.raises(TypeError, match="not int"):
        local_version(5, "b" * 40)
    with pytest.raises(ValueError, match="not a git commit"):
        local_version("5.14.1", "main")


def test_fork_version_sets_setup_py_and_init_alike():
    init = '# header\n__version__ = "5.24.0"\n'
    setup_py = 'setup(\n    name="transformers",\n    version="5.24.0",  # expected format\n)\n'
    version, sources = versioned_sources(init, setup_py, "c" * 40)
    assert version == "5.24.0+cachecropfix.gcccccccccc"
    assert sources["src/transformers/__init__.py"] == f'# header\n__version__ = "{version}"\n'
    assert f'    version="{version}",  # expected format' in sources["setup.py"]
    # A checkout whose setup.py sets no version: only `__version__`
    assert list(versioned_sources(init, "setup()\n", "c" * 40)[1]) == ["src/transformers/__init__.py"]


def test_stock_audit_names_every_verdict_of_the_audit():
    from cache_crop_fix.audit import common
    from cache_crop_fix.drift.stock_audit import KINDS, StockAudit

    assert set(KINDS) == {common.CORRECT, common.REFUSED, common.INCONSISTENT, common.CRASH}
    rows = (("f", "s", "`crop(-1)`", "exact", ""), ("f", "s", "`crop(2)`", "wrong", "kept 3"))
    assert StockAudit("v5_24", rows).counts() == {"exact": 1, "refused": 0, "wrong": 1, "crash": 0}
