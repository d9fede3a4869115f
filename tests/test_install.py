"""
Installing cache_crop_fix the ways users do, and the opt-in activation through `CACHE_CROP_FIX=1` (issue 6).

Everything runs in subprocesses of ONE temporary venv per module, made with `python -m venv` and given
torch==2.13.0 and transformers==5.14.1 by pip (torch comes from the local wheel cache). Each install path (regular
`pip install .`, editable, a built wheel, `git+file://...@main`) installs, is checked, and uninstalls; the behaviour
tests then run against the installed wheel. The source is the working tree as it would be committed (tracked files
and untracked ones that are not ignored), made the `main` branch of a temporary git repository, so that the git path
installs exactly what the other paths install; in CI (a clean clone) that is HEAD.

Set CACHE_CROP_FIX_TEST_ALL_INSTALLS=1 to include the git path (slow: a regular build, from a clone), and
CACHE_CROP_FIX_TEST_VENV=/some/dir to keep the venv between runs (it is created there once).

The programs below never import cache_crop_fix unless they say so: the fix must come from the start-up hook.
Start-up cost is measured by hand and reported, not asserted here.
"""

import os
import re
import runpy
import shutil
import subprocess
import sys
import textwrap
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest


ROOT = Path(__file__).resolve().parents[1]
BOOTSTRAP = runpy.run_path(str(ROOT / "src" / "cache_crop_fix" / "_bootstrap.py"))
PTH_NAME, PTH_LINE, ENV_VAR = BOOTSTRAP["PTH_NAME"], BOOTSTRAP["PTH_LINE"], BOOTSTRAP["ENV_VAR"]
REQUIREMENTS = ["torch==2.13.0", "transformers==5.14.1"]
KEEP_VENV = "CACHE_CROP_FIX_TEST_VENV"
ALL_INSTALLS = "CACHE_CROP_FIX_TEST_ALL_INSTALLS"

# The reproduction of the seed issue (huggingface/transformers#47433), verbatim
SEED = textwrap.dedent(
    """\
    import torch
    from transformers import DynamicCache

    key = torch.arange(3, dtype=torch.float32).reshape(1, 1, 3, 1)

    cache = DynamicCache()
    cache.update(key, key.clone(), layer_idx=0)
    cache.crop(0)
    print(cache.get_seq_length())  # 3, expected 0

    cache = DynamicCache()
    cache.update(key, key.clone(), layer_idx=0)
    cache.crop(-5)
    print(cache.get_seq_length())  # 1, expected 0
    """
)
STOCK, FIXED = ["3", "1"], ["0", "0"]

# The test environment must not leak into the venv's processes
_SCRUBBED_ENV = {
    ENV_VAR,
    "PYTHONPATH",
    "PYTHONHOME",
    "PYTHONSTARTUP",
    "PYTHONWARNINGS",
    "VIRTUAL_ENV",
    "PYTHONSAFEPATH",
}

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


class Venv:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.python = str(path / "bin" / "python")
        self.purelib = Path(self.run("import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip())

    def env(self, **extra: str) -> dict[str, str]:
        env = {key: value for key, value in os.environ.items() if key not in _SCRUBBED_ENV}
        env.update({"PYTHONNOUSERSITE": "1", "PYTHONIOENCODING": "utf-8", "HF_HUB_OFFLINE": "1"})
        env.update(extra)
        return env

    def run(self, code: str, check: bool = True, **env: str) -> subprocess.CompletedProcess:
        return self.call([self.python, "-c", code], check=check, **env)

    def call(self, args: list[str], check: bool = True, **env: str) -> subprocess.CompletedProcess:
        result = subprocess.run(args, capture_output=True, text=True, env=self.env(**env), timeout=900)
        if check and result.returncode != 0:
            pytest.fail(f"{args} exited with {result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}")
        return result

    def pip(self, *args: str) -> subprocess.CompletedProcess:
        return self.call([self.python, "-m", "pip", "--no-input", *args])

    def is_installed(self) -> bool:
        return any(self.purelib.glob("cache_crop_fix-*.dist-info"))

    def uninstall(self) -> None:
        if self.is_installed():
            self.pip("uninstall", "--yes", "cache_crop_fix")

    def torch_dist(self) -> list[str]:
        return sorted(path.name for path in self.purelib.glob("torch-*.dist-info"))

    def top_level(self) -> set[str]:
        entries = {entry.name for entry in self.purelib.iterdir() if entry.name != "__pycache__"}
        return entries | {f"__pycache__/{entry.name}" for entry in (self.purelib / "__pycache__").glob("*")}

    def ours(self) -> list[str]:
        """Every file or directory in site-packages (and the venv's bin/) whose name mentions cache_crop_fix."""
        found = []
        for base in (self.purelib, self.path / "bin"):
            for directory, dirnames, filenames in os.walk(base):
                if Path(directory) == self.purelib:
                    dirnames[:] = [name for name in dirnames if not name.startswith(("torch", "transformers"))]
                found += [os.path.join(directory, name) for name in dirnames + filenames if "cache_crop_fix" in name]
        return found


@pytest.fixture(scope="module")
def venv(tmp_path_factory) -> Iterator[Venv]:
    kept = os.environ.get(KEEP_VENV)
    path = Path(kept) if kept else tmp_path_factory.mktemp("venv") / "venv"
    try:
        if not (path / "bin" / "python").exists():
            subprocess.run([sys.executable, "-m", "venv", str(path)], check=True, capture_output=True, timeout=300)
        venv = Venv(path)
        if not kept or not venv.torch_dist():
            # --no-compile: torch's thousands of files are compiled lazily, when (and if) a test imports them
            venv.pip("install", "--quiet", "--no-compile", *REQUIREMENTS)
        venv.uninstall()
        yield venv
    finally:
        if not kept:
            _remove_in_background(path)


def _remove_in_background(path: Path) -> None:
    """Deletes the venv (~1 GB, 30k files) without making the test session wait for the disk."""
    if os.name == "posix" and shutil.which("rm"):
        subprocess.Popen(
            ["rm", "-rf", str(path)], start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
    else:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    """The working tree as it would be committed, as branch `main` of a new git repository."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split("\0")
    repo = tmp_path_factory.mktemp("source") / "cache_crop_fix"
    for name in filter(None, listed):
        if (ROOT / name).is_file():
            (repo / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, repo / name)
    git = ["git", "-c", "user.name=test", "-c", "user.email=test@example.com", "-c", "commit.gpgsign=false"]
    subprocess.run(git + ["init", "--quiet", "--initial-branch=main"], cwd=repo, check=True)
    subprocess.run(git + ["add", "--all"], cwd=repo, check=True)
    subprocess.run(git + ["commit", "--quiet", "--message", "snapshot"], cwd=repo, check=True)
    return repo


@pytest.fixture(scope="module")
def built_wheel(venv, source, tmp_path_factory) -> Path:
    _clean(source)
    dist = tmp_path_factory.mktemp("dist")
    venv.pip("wheel", "--no-deps", "--wheel-dir", str(dist), str(source))
    (wheel,) = dist.glob("cache_crop_fix-*.whl")
    return wheel


@pytest.fixture
def installed(venv, built_wheel) -> Venv:
    """The built wheel, installed (a regular install)."""
    if not ((venv.purelib / PTH_NAME).is_file() and (venv.purelib / "cache_crop_fix").is_dir()):
        venv.uninstall()
        venv.pip("install", "--no-deps", str(built_wheel))
    return venv


def _clean(source: Path) -> None:
    """Removes what a previous in-tree build left (build/, *.egg-info)."""
    subprocess.run(["git", "clean", "-xdfq"], cwd=source, check=True)


def _lines(result: subprocess.CompletedProcess) -> list[str]:
    return result.stdout.split()


def _our_warnings(result: subprocess.CompletedProcess) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.startswith("cache_crop_fix:")]


# Install paths: each installs, proves that the start-up hook works, and uninstalls without leaving anything behind


@pytest.mark.parametrize(
    "how",
    [
        "regular",
        "editable",
        "wheel",
        pytest.param(
            "git",
            marks=pytest.mark.skipif(
                not os.environ.get(ALL_INSTALLS),
                reason=f"slow (a regular install from a git clone): set {ALL_INSTALLS}=1",
            ),
        ),
    ],
)
def test_install_path_activates_with_the_variable_and_uninstalls_cleanly(venv, source, built_wheel, how):
    venv.uninstall()
    before, torch_before = venv.top_level(), venv.torch_dist()
    _clean(source)
    target = {
        "regular": [str(source)],
        "editable": ["--editable", str(source)],
        "wheel": [str(built_wheel)],
        "git": [f"git+{source.as_uri()}@main"],
    }[how]
    result = venv.pip("install", *target)

    # Nothing else is installed or replaced: transformers 5.14.1 and torch 2.13.0 already satisfy the requirements
    installing = [line for line in result.stdout.splitlines() if line.startswith("Installing collected packages")]
    assert [line.replace("-", "_") for line in installing] == ["Installing collected packages: cache_crop_fix"]
    assert venv.torch_dist() == torch_before

    # The `.pth` lands in site-packages and is recorded, so that `pip uninstall` removes it
    assert (venv.purelib / PTH_NAME).read_text(encoding="utf-8") == PTH_LINE
    (dist_info,) = venv.purelib.glob("cache_crop_fix-*.dist-info")
    assert PTH_NAME in [line.split(",")[0] for line in (dist_info / "RECORD").read_text().splitlines()]
    metadata = (dist_info / "METADATA").read_text().splitlines()
    requires = sorted(line.split(":", 1)[1].replace(" ", "") for line in metadata if line.startswith("Requires-Dist:"))
    # The union of the targets' releases (5.14.x and 5.24.x), as one pip range; and no torch
    gap = ",".join(f"!=5.{minor}.*" for minor in range(15, 24))
    assert requires == ["packaging", f"transformers{gap},<5.26,>=5.14.0"]
    assert (venv.purelib / "cache_crop_fix").is_dir() is (how != "editable")  # editable: the code stays in source

    # The seed reproduction, which does not import cache_crop_fix, gets the fix from the environment
    assert "cache_crop_fix" not in SEED
    fixed = venv.run(SEED, **{ENV_VAR: "1"})
    assert _lines(fixed) == FIXED
    assert _our_warnings(fixed) == []

    venv.pip("uninstall", "--yes", "cache_crop_fix")
    assert venv.top_level() == before
    assert venv.ours() == []
    after = venv.run("import sys; print(sorted(m for m in sys.modules if 'cache_crop_fix' in m))", **{ENV_VAR: "1"})
    assert (after.stdout.strip(), after.stderr) == ("[]", "")


def test_wheel_carries_the_pth_at_its_root(built_wheel):
    with zipfile.ZipFile(built_wheel) as archive:
        names = archive.namelist()
        assert archive.read(PTH_NAME).decode() == PTH_LINE
        (record,) = [name for name in names if name.endswith(".dist-info/RECORD")]
        assert any(line.startswith(PTH_NAME + ",") for line in archive.read(record).decode().splitlines())
    assert "cache_crop_fix/_bootstrap.py" in names


# The start-up hook (against the installed wheel)


def test_startup_imports_neither_torch_nor_transformers(installed):
    probe = textwrap.dedent(
        """\
        import sys
        heavy = sorted(m for m in sys.modules if m.split(".")[0] in {"torch", "transformers", "cache_crop_fix", "numpy"})
        bootstrap = sys.modules.get("_cache_crop_fix_bootstrap")
        print(heavy, bootstrap and bootstrap.state, sum(type(f).__name__ == "_Hook" for f in sys.meta_path))
        """
    )
    expected = {"1": "[] waiting 1", "yes": "[] waiting 1", None: "[] None 0", "": "[] None 0"}
    expected |= {"0": "[] off 0", "off": "[] off 0", "maybe": "[] off 0"}
    for value, output in expected.items():
        result = installed.run(probe, **({} if value is None else {ENV_VAR: value}))
        assert result.stdout.strip() == output, value
        if value == "maybe":
            assert _our_warnings(result) == [
                f"cache_crop_fix: {ENV_VAR}='maybe' is not understood (use {ENV_VAR}=1); the fix stays off"
            ]
        else:
            assert result.stderr == "", value


def test_stock_without_the_variable_and_fixed_when_the_hook_comes_after_transformers(installed):
    # Without the variable nothing happens. Then the hook is installed the way `site` does it at start-up (as a tool
    # calling `site.addsitedir` would) while transformers.cache_utils is already imported: the fix still applies.
    late_hook = textwrap.dedent(
        f"""\
        import os, site, sys, sysconfig
        assert "cache_crop_fix" not in sys.modules and "transformers.cache_utils" in sys.modules
        os.environ[{ENV_VAR!r}] = "1"
        site.addsitedir(sysconfig.get_paths()["purelib"])
        assert sys.modules["cache_crop_fix"].is_active()
        """
    )
    result = installed.run(SEED + late_hook + SEED)
    assert _lines(result) == STOCK + FIXED
    assert _our_warnings(result) == []


def _shadowing_package(tmp_path: Path, bootstrap: str, init: str) -> str:
    """A `cache_crop_fix` package on PYTHONPATH, found before the installed one: a broken install, simulated."""
    package = tmp_path / "shadow" / "cache_crop_fix"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(init)
    (package / "_bootstrap.py").write_text(bootstrap)
    return str(package.parent)


def test_broken_bootstrap_warns_once_and_does_not_break_import_transformers(installed, tmp_path):
    shadow = _shadowing_package(tmp_path, "raise RuntimeError('simulated broken bootstrap')\n", "")
    result = installed.run("import transformers; print(transformers.__version__)", PYTHONPATH=shadow, **{ENV_VAR: "1"})
    assert _lines(result) == ["5.14.1"]
    (warning,) = _our_warnings(result)  # once, although `site` runs a venv's `.pth` lines twice
    assert "start-up hook failed" in warning and "simulated broken bootstrap" in warning
    assert "Traceback" not in result.stderr


def test_failing_activation_warns_once_and_leaves_transformers_stock(installed, tmp_path):
    real_bootstrap = (installed.purelib / "cache_crop_fix" / "_bootstrap.py").read_text()
    shadow = _shadowing_package(tmp_path, real_bootstrap, "raise RuntimeError('simulated broken package')\n")
    result = installed.run("import transformers\n" + SEED, PYTHONPATH=shadow, **{ENV_VAR: "1"})
    assert _lines(result) == STOCK
    (warning,) = _our_warnings(result)
    assert "could not be applied" in warning and "simulated broken package" in warning
    assert "Traceback" not in result.stderr


def test_unsupported_transformers_with_the_variable_warns_once_and_stays_stock(installed):
    # Simulated: transformers reports 5.15.0 before its cache_utils is imported
    result = installed.run("import transformers\ntransformers.__version__ = '5.15.0'\n" + SEED, **{ENV_VAR: "1"})
    assert _lines(result) == STOCK
    assert result.stderr.count("RuntimeWarning: cache_crop_fix is inactive") == 1
    assert _our_warnings(result) == [] and "Traceback" not in result.stderr


# `python -m cache_crop_fix status`


def _status(venv: Venv, **env: str) -> subprocess.CompletedProcess:
    return venv.call([venv.python, "-m", "cache_crop_fix", "status"], check=False, **env)


def _field(result: subprocess.CompletedProcess, name: str) -> str:
    (line,) = [line for line in result.stdout.splitlines() if line.startswith(name + ":")]
    return line.split(":", 1)[1].strip()


def test_status_without_the_variable(installed):
    result = _status(installed)
    assert result.returncode == 0, result.stdout + result.stderr
    assert _field(result, "this process") == "active"
    assert _field(result, "environment").startswith(f"off ({ENV_VAR} is not set)")
    assert _field(result, "start-up hook") == str(installed.purelib / PTH_NAME)
    assert _field(result, "transformers").startswith("5.14.1 (supported;")
    assert _field(result, "torch") == "2.13.0+cpu"
    rows = {tuple(line.split()) for line in result.stdout.splitlines() if line.startswith("  ")}
    assert ("DynamicLayer.crop", "transformers.cache_utils") in rows
    assert ("Cache.crop", "transformers.cache_utils") in rows
    assert ("AssistedCandidateGenerator._update_past_and_masks", "transformers.generation.candidate_generator") in rows
    assert ("transformers.models.pi0.modeling_pi0",) in rows  # pending: patched when transformers imports it


def test_status_with_the_variable(installed, tmp_path):
    result = _status(installed, **{ENV_VAR: "1"})
    assert result.returncode == 0, result.stdout + result.stderr
    assert _field(result, "environment").startswith(f"on ({ENV_VAR}=1)")
    assert _field(result, "start-up hook") == f"{installed.purelib / PTH_NAME} (ran in this process: activated)"
    assert _our_warnings(result) == []

    # The variable asks for the fix but the `.pth` is missing (e.g. installed by a tool that dropped it): exit 1
    pth = installed.purelib / PTH_NAME
    pth.rename(tmp_path / PTH_NAME)
    try:
        result = _status(installed, **{ENV_VAR: "1"})
    finally:
        (tmp_path / PTH_NAME).rename(pth)
    assert result.returncode == 1
    assert _field(result, "this process") == "active"
    assert _field(result, "environment").startswith(f"broken ({ENV_VAR}=1): the start-up hook did not run")
    assert _field(result, "start-up hook").startswith("not installed")


def test_status_with_unsupported_transformers_exits_1(installed):
    # Simulated: transformers reports another version before cache_crop_fix is imported
    program = textwrap.dedent(
        """\
        import runpy, sys
        import transformers
        transformers.__version__ = "5.15.0"
        sys.argv = ["python -m cache_crop_fix", "status"]
        runpy.run_module("cache_crop_fix", run_name="__main__", alter_sys=True)
        """
    )
    result = installed.run(program, check=False)
    assert result.returncode == 1, result.stdout + result.stderr
    assert _field(result, "this process") == "inactive"
    assert _field(result, "transformers").startswith("5.15.0 (unsupported;")
    assert _field(result, "patched") == "nothing"
    assert "5.15.0 is installed; nothing was patched" in _field(result, "reason")
    assert "cache_crop_fix is inactive" in result.stderr  # the RuntimeWarning of `import cache_crop_fix`


# The main target: a venv with transformers 5.24.0, then `pip install .` (a regular install) and `import cache_crop_fix`

# On stock 5.24.0 a `StaticLayer` drives its counter negative when asked to remove more tokens than it holds
MAIN_TARGET_PROBE = textwrap.dedent(
    """\
    import sys
    import torch
    if "--fix" in sys.argv:
        import cache_crop_fix
    from transformers.cache_utils import Cache, StaticLayer

    cache = Cache(layers=[StaticLayer(max_cache_len=8)])
    key = torch.arange(3, dtype=torch.float32).reshape(1, 1, 3, 1)
    cache.update(key, key.clone(), layer_idx=0)
    cache.crop(-5)
    print(int(cache.get_seq_length()))  # 0; stock 5.24.0: -2
    """
)


@pytest.mark.skipif(
    not os.environ.get(ALL_INSTALLS), reason=f"slow (a second venv, with transformers 5.24.0): set {ALL_INSTALLS}=1"
)
def test_regular_install_fixes_transformers_5_24(source, tmp_path):
    path = tmp_path / "venv-v5_24"
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True, capture_output=True, timeout=300)
    main = Venv(path)
    requirements = ["torch==2.13.0", "transformers==5.24.0"]
    uv = shutil.which("uv") or shutil.which("uv", path=str(Path(sys.executable).parent))
    try:
        if uv:  # seconds, from uv's cache (as `make install-main`); pip otherwise
            uv_pip = [sys.executable, str(ROOT / "utils" / "uv_pip.py"), "install", "--quiet", "--python", main.python]
            main.call(uv_pip + requirements, UV=uv)
        else:
            main.pip("install", "--quiet", "--no-compile", *requirements)
        _clean(source)
        result = main.pip("install", str(source))
        # transformers 5.24.0 satisfies the requirements: nothing else is installed
        installing = [line for line in result.stdout.splitlines() if line.startswith("Installing collected packages")]
        assert [line.replace("-", "_") for line in installing] == ["Installing collected packages: cache_crop_fix"]

        probe = tmp_path / "probe.py"
        probe.write_text(MAIN_TARGET_PROBE)
        assert _lines(main.call([main.python, str(probe)])) == ["-2"]
        fixed = main.call([main.python, str(probe), "--fix"])
        assert (_lines(fixed), fixed.stderr) == (["0"], "")

        status = main.call([main.python, "-m", "cache_crop_fix", "status"])
        assert _field(status, "this process") == "active"
        assert _field(status, "transformers") == "5.24.0 (supported; target v5_24, the 5.24 backport)"
    finally:
        _remove_in_background(path)


# The `.pth` line and the command line, in this process (no venv)


def test_pth_is_one_line_that_checks_the_variable_first():
    assert PTH_LINE.endswith("\n") and PTH_LINE.count("\n") == 1
    assert PTH_LINE.startswith(f"import os; os.environ.get({ENV_VAR!r}) and exec(")


@pytest.mark.parametrize(
    "value, expected",
    [
        ("1", True),
        ("true", True),
        (" YES ", True),
        ("on", True),
        ("0", False),
        ("", False),
        ("off", False),
        ("2", False),
    ],
)
def test_requested(value, expected):
    assert BOOTSTRAP["requested"]({ENV_VAR: value}) is expected
    assert BOOTSTRAP["requested"]({}) is False


def test_fingerprints_command_still_works(capsys):
    from cache_crop_fix.__main__ import main

    assert main(["fingerprints"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines and all(re.fullmatch(r'    "[\w.]+": frozenset\(\{"[0-9a-f]{16}"\}\),', line) for line in lines)
    assert any('"transformers.cache_utils.DynamicLayer.crop"' in line for line in lines)
