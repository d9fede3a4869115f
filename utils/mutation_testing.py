"""Mutation testing of the overlay of each target with cosmic-ray (`make mutate`, `make mutate TARGET=v5_14`).

Why cosmic-ray: it writes each mutant into the source FILE on disk and runs the tests in a fresh process, which is
what the patcher needs (it re-creates the overlay's functions from their code objects and reads their source for the
decorators; a tool that swaps functions for trampolines at runtime, as mutmut 3 does, would be installed as the
trampoline, with globals that upstream's modules do not define).

The session runs in a scratch copy of `src/` and `tests/` (`build/mutation/<target>/`), so an interrupted run never
leaves a mutant in the work tree, and the work tree can be edited while it runs. The tests run with
`PYTHONPATH=<copy>/src`, which comes before the editable install on `sys.path`.

Mutants that cannot change behaviour by construction are marked skipped before the run, each with its reason:
- in a type annotation (annotations are never used at runtime by this code);
- in a definition that a later step of the target defines again: the patcher installs only the last one, so the
  stacked fix never runs it (it is live only in the intermediate exported commits);
- operators left out for cost (see `EXCLUDED_OPERATORS`): replacing an arithmetic operator by a bitwise or power
  operator, or a comparison by an identity/membership test; every such mutant of this code either raises on ints and
  tensors or is a stronger form of a kept mutant (`+` -> `-`, `<` -> `<=`, ...).

Every survivor must be killed by a test or be listed in `utils/mutation_equivalents/<target>.py` with a one-line argument; the report flags the
others as unexplained, and the script exits non-zero if there is any.
"""

from __future__ import annotations

import argparse
import ast
import concurrent.futures
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
import zlib
from pathlib import Path


ROOT = Path(__file__).resolve().parent.parent
OVERLAY = ROOT / "src" / "cache_crop_fix" / "overlay"
BUILD = ROOT / "build" / "mutation"

# The tests of each target, in the order they run against a mutant (fast unit tests first, the end-to-end generation
# runs last; `-x` stops at the first failure). A mutant runs only those of them that execute the function it is in
# (measured by one coverage run of the whole selection at the start of the session, `coverage.json`), and the whole
# selection if it is outside any function (module level, a decorator, a default value's signature line).
TEST_SELECTION = {
    "v5_14": (
        "tests/v5_14/utils/test_cache_utils.py",
        "tests/v5_14/utils",
        "tests/v5_14/generation",
        "tests/v5_14/models",
        "tests/test_call_sites.py",
        "tests/test_kept_v5_14.py",
        "tests/test_stateful.py",
        "tests/test_stateful_hybrid.py",
        "tests/test_stateful_history.py",
        "tests/test_generation.py::AssistedGenerationCropTest::test_assistant_model_matches_greedy_llama_prompt_1",
        "tests/test_generation.py::AssistedGenerationCropTest::test_assistant_model_matches_greedy_gemma2_prompt_7",
        "tests/test_generation.py::AssistedGenerationCropTest::test_sliding_window_is_crossed_mistral",
        "tests/test_generation_hybrid.py::HybridAssistedGenerationTest::test_hybrid_assistant_matches_greedy_1_qwen3_next",
        "tests/test_generation_hybrid.py::HybridAssistedGenerationTest::test_hybrid_assistant_matches_greedy_2_lfm2",
        "tests/test_generation_hybrid.py::AssistantRollbackModeTest",
        "tests/test_generation_history.py",
    ),
    # the upstream main target: its upstream-style tests, then the project's history tests (they hold for both targets)
    "v5_24": (
        "tests/v5_24",
        "tests/test_syncs.py",
        "tests/test_crop_arguments.py",
        "tests/test_kept_crops.py",
        "tests/test_stateful_history.py",
        "tests/test_generation_history.py",
    ),
    # upstream main (5.25): its upstream-style tests, the host-sync counts, then the end-to-end hybrid generation
    "v5_25": (
        "tests/v5_25",
        "tests/test_syncs.py",
        "tests/test_kept_linear_attention.py",
        "tests/test_kept_attention_crops.py",
        "tests/test_generation_main_hybrid.py",
    ),
}
# The first phase of a two-phase session (`--fast`): the unit tests of the target, which kill most mutants in seconds.
# The end-to-end generation and stateful tests then run only for the survivors of the first phase (`--recheck`, which
# runs every test that executes the mutated function).
FAST_TESTS = {
    "v5_14": ("tests/v5_14/", "tests/test_call_sites.py", "tests/test_kept_v5_14.py"),
    "v5_24": ("tests/v5_24/", "tests/test_syncs.py", "tests/test_crop_arguments.py", "tests/test_kept_crops.py"),
    "v5_25": (
        "tests/v5_25/",
        "tests/test_syncs.py",
        "tests/test_kept_linear_attention.py",
        "tests/test_kept_attention_crops.py",
    ),
}
# Left out of the first phase although under FAST_TESTS: end-to-end runs of a model (a minute or more per mutant on the
# shared machine); they run in the second phase.
SLOW_TESTS = {"v5_25": ("tests/v5_25/utils/test_cache_utils.py::AssistedDecodingStatesTest",)}
# Deselected for speed: the quanto/hqq backend tests build native kernels (minutes on a cold cache); the in-repo
# quantizer tests of the same `crop` run instead.
DESELECT = {"v5_14": "not QuantizedBackendsCropTest", "v5_24": "", "v5_25": ""}
TIMEOUT = 300.0

# Left out for cost (2 shared cores): a full cosmic-ray operator set gives ~590 mutants of the 5.14 overlay (after the
# annotation and superseded skips), ~3 hours. We keep the classic "sufficient" set (Offutt et al.): relational
# operators to their boundary (`<` <-> `<=`, `>` <-> `>=`) and negation (`==` <-> `!=`), arithmetic `+` <-> `-` and
# `*` <-> `/`, numbers +-1, `not` added or removed, `and` <-> `or`, minus removed, empty loops, exceptions, booleans,
# decorators. The operators left out replace an operator by a far one (e.g. `-` by `//`, `>` by `==`): on this code
# such mutants change the result for nearly every input, so any test that kills the boundary mutant kills them.
EXCLUDED_OPERATORS = (
    r"core/ReplaceBinaryOperator_(?!Add_Sub$|Sub_Add$|Mul_Div$|Div_Mul$)",
    r"core/ReplaceComparisonOperator_(?!Lt_LtE$|LtE_Lt$|Gt_GtE$|GtE_Gt$|Eq_NotEq$|NotEq_Eq$)",
    r"core/ReplaceUnaryOperator_USub_UAdd$",  # `+k` is `k`: the same program as the `Delete_USub` mutant
    r"core/ReplaceUnaryOperator_USub_(Not|Invert)$",  # `not k` / `~k` for an int count: covered by `Delete_USub`
)

# Survivors argued equivalent: `utils/mutation_equivalents/<target>.py` (one file per target, `OPERATOR` and `SEMANTIC`).


def _equivalents(target: str, family: str) -> dict[tuple[str, str, str], str]:
    """The survivors of a target's mutant family argued equivalent (`utils/mutation_equivalents/<target>.py`)."""
    import importlib

    module = importlib.import_module(f"mutation_equivalents.{target}")
    return module.SEMANTIC if family == "semantic" else module.OPERATOR


FAMILIES = ("operator", "semantic")


def _work(target: str, family: str) -> Path:
    """The session folder of a target and mutant family: `build/mutation/<target>/` (operator family, cosmic-ray's
    own mutants) or `build/mutation/<target>-semantic/`."""
    return BUILD / target if family == "operator" else BUILD / f"{target}-{family}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("targets", nargs="*", help="targets to mutate (default: every target with an overlay)")
    parser.add_argument("--limit", type=int, default=None, help="run at most this many mutants (a smoke run)")
    parser.add_argument(
        "--recheck",
        action="store_true",
        help="re-test the survivors of the last session against the current tests (after adding tests)",
    )
    parser.add_argument("--report", action="store_true", help="only write the report of the last session")
    parser.add_argument("--jobs", type=int, default=1, help="mutants tested in parallel (each in its own copy)")
    parser.add_argument("--dry-run", action="store_true", help="only count the mutants and the skipped ones")
    parser.add_argument("--only", default=None, help="regex on 'file:line operator': run only the matching mutants")
    parser.add_argument(
        "--fast",
        action="store_true",
        help="first phase only: each mutant runs the unit tests (FAST_TESTS); `--recheck` runs the rest for survivors "
        "(`--recheck --fast`: the survivors against the current unit tests only)",
    )
    parser.add_argument(
        "--reuse-map",
        action="store_true",
        help="with --recheck: keep the session's coverage map (which tests run what) instead of measuring it again",
    )
    parser.add_argument(
        "--family",
        choices=FAMILIES,
        default="operator",
        help="operator: cosmic-ray's operator mutants; semantic: statement-level mutants from the overlay's AST "
        "(utils/semantic_mutants.py)",
    )
    parser.add_argument("--phase", default="all", help=argparse.SUPPRESS)  # of `--run-tests`: "fast" or "all"
    parser.add_argument("--run-tests", metavar="TARGET", help=argparse.SUPPRESS)  # cosmic-ray's test command
    parser.add_argument("--serve", metavar="TARGET", help=argparse.SUPPRESS)  # the test server of one scratch copy
    parser.add_argument("--map-coverage", metavar="TARGET", help=argparse.SUPPRESS)  # which tests run what
    args = parser.parse_args(argv)
    if args.run_tests:
        return run_tests(args.run_tests, args.phase)
    if args.serve:
        return serve(args.serve)
    if args.map_coverage:
        return map_coverage(args.map_coverage)

    import transformers
    from cache_crop_fix.targets import get_target

    targets = args.targets or sorted(p.name for p in OVERLAY.iterdir() if p.is_dir() and p.name.startswith("v"))
    status = 0
    for name in targets:
        try:
            target = get_target(name)
        except KeyError:
            target = None
        if target is None or not target.supports(transformers.__version__):
            print(
                f"[{name}] skipped: its tests need the transformers release it targets, but {transformers.__version__} "
                "is installed (run `make mutate` in an environment with that release)."
            )
            continue
        if args.recheck:
            status |= recheck_survivors(name, args.only, args.reuse_map, args.family, args.fast)
        elif args.report:
            status |= report_only(name, args.family)
        else:
            status |= run_target(name, args.limit, args.only, args.dry_run, args.jobs, args.fast, args.family)
    return status


def run_target(
    target: str,
    limit: int | None,
    only: str | None,
    dry_run: bool = False,
    jobs: int = 1,
    fast: bool = False,
    family: str = "operator",
) -> int:
    work = _work(target, family)
    shutil.rmtree(work, ignore_errors=True)
    overlay = Path("src/cache_crop_fix/overlay") / target
    test_command = f"{sys.executable} -B {ROOT / 'utils' / 'mutation_testing.py'} --run-tests {target}"
    if fast:
        test_command += " --phase fast"
    cosmic_ray = [sys.executable, "-m", "cosmic_ray.cli"]
    # The overlay as it is, to find what cosmic-ray changed in a copy (`run_tests`)
    shutil.copytree(ROOT / overlay, work / "pristine", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    # One scratch copy per job: cosmic-ray writes each mutant into the files of its copy
    shards = [work / f"shard{index}" for index in range(jobs)]
    for shard in shards:
        shard.mkdir(parents=True)
        _copy_tree(shard)
        files = sorted(
            str(path.relative_to(shard))
            for path in (shard / overlay).rglob("*.py")
            if path.name != "__init__.py" and path.stat().st_size > 0 and "pr" not in path.parent.parts
        )
        (shard / "cosmic-ray.toml").write_text(
            "[cosmic-ray]\n"
            f"module-path = {json.dumps(files)}\n"
            f"timeout = {TIMEOUT}\n"
            "excluded-modules = []\n"
            f"test-command = {json.dumps(test_command)}\n"
            '[cosmic-ray.distributor]\nname = "local"\n'
        )

    skipped = {}
    for index, shard in enumerate(shards):
        if family == "semantic":
            _init_semantic(shard, overlay)
        else:
            subprocess.run(
                [*cosmic_ray, "init", "cosmic-ray.toml", "session.sqlite"], cwd=shard, env=_env(shard), check=True
            )
        skipped = skip_mutants(shard / "session.sqlite", shard, overlay, limit, only, (index, jobs))
    print(f"[{target}] {family} mutants: {skipped}, in {jobs} job(s)", flush=True)
    if dry_run:
        return 0
    started = time.monotonic()
    # The baseline: the whole selection passes on the unmutated overlay, under coverage (which tests run what)
    _map(target, shards[0])
    baseline_seconds = time.monotonic() - started
    started = time.monotonic()
    with _test_servers(target, shards):
        if family == "semantic":
            # cosmic-ray's `exec` knows only its own operators: one thread per scratch copy writes our mutants
            with concurrent.futures.ThreadPoolExecutor(len(shards)) as pool:
                list(pool.map(lambda shard: _exec_semantic(target, shard, test_command), shards))
            processes = []
        processes = (
            processes
            if family == "semantic"
            else [
                subprocess.Popen(
                    [*cosmic_ray, "exec", "cosmic-ray.toml", "session.sqlite"], cwd=shard, env=_env(shard)
                )
                for shard in shards
            ]
        )
        if any(process.wait() for process in processes):
            raise SystemExit(f"[{target}] cosmic-ray exec failed")
    exec_seconds = time.monotonic() - started
    return report(target, shards, overlay, skipped, baseline_seconds, exec_seconds, test_command, jobs)


def _init_semantic(shard: Path, overlay: Path) -> None:
    """A cosmic-ray session (`session.sqlite`) holding the semantic mutants of the overlay, one work item each (its
    kind as the operator name `semantic/<kind>`, its description in `operator_args`), so that the skips, the report
    and `--recheck` read it as they read cosmic-ray's own."""
    import semantic_mutants
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import MutationSpec, WorkItem

    with use_db(str(shard / "session.sqlite"), WorkDB.Mode.create) as db:
        for path in sorted((shard / overlay).rglob("*.py")):
            if path.name == "__init__.py" or path.stat().st_size == 0 or "pr" in path.parent.parts:
                continue
            relative = path.relative_to(shard)
            for occurrence, mutant in enumerate(semantic_mutants.mutants(path.read_text())):
                spec = MutationSpec(
                    module_path=relative,
                    operator_name=f"semantic/{mutant.kind}",
                    occurrence=occurrence,
                    start_pos=mutant.start,
                    end_pos=mutant.end,
                    operator_args={"description": mutant.description},
                )
                db.add_work_item(WorkItem.single(f"{relative}:{occurrence}", spec))


_SEMANTIC_CACHE: dict[tuple[str, str], list] = {}


def _test_semantic(shard: Path, mutation, test_command: str):
    """Writes one semantic mutant into its file in `shard`, runs the test command there (as cosmic-ray's worker does),
    and puts the file back."""
    import semantic_mutants
    from cosmic_ray.mutating import _make_diff
    from cosmic_ray.work_item import TestOutcome, WorkerOutcome, WorkResult

    path = shard / mutation.module_path
    original = path.read_text()
    key = (str(mutation.module_path), original)
    if key not in _SEMANTIC_CACHE:
        _SEMANTIC_CACHE[key] = semantic_mutants.mutants(original)
    mutant = _SEMANTIC_CACHE[key][mutation.occurrence]
    if mutant.description != mutation.operator_args["description"]:
        raise SystemExit(f"{mutation.module_path}: the overlay changed since the session was made (mutant {mutant})")
    mutated = mutant.apply(original)
    try:
        path.write_text(mutated)
        # what cosmic-ray's `run_tests` does, in the scratch copy (its threads share one working directory)
        process = subprocess.Popen(
            shlex.split(test_command),
            cwd=shard,
            env=_env(shard),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            output = process.communicate(timeout=TIMEOUT)[0].decode(errors="replace")
            outcome = TestOutcome.SURVIVED if process.returncode == 0 else TestOutcome.KILLED
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            output, outcome = "timeout", TestOutcome.KILLED
    finally:
        path.write_text(original)
    diff = "\n".join(_make_diff(original, mutated, mutation.module_path))
    return WorkResult(worker_outcome=WorkerOutcome.NORMAL, output=output, test_outcome=outcome, diff=diff)


def _exec_semantic(target: str, shard: Path, test_command: str) -> None:
    from cosmic_ray.work_db import WorkDB, use_db

    with use_db(str(shard / "session.sqlite"), WorkDB.Mode.open) as db:
        for item in sorted(db.pending_work_items, key=lambda item: item.job_id):
            (mutation,) = item.mutations
            result = _test_semantic(shard, mutation, test_command)
            print(
                f"[{target}] {mutation.module_path}:{mutation.start_pos[0]} {mutation.operator_name}: "
                f"{result.test_outcome}",
                flush=True,
            )
            db.set_result(item.job_id, result)


def _copy_tree(shard: Path) -> None:
    for part in ("src", "tests"):
        shutil.rmtree(shard / part, ignore_errors=True)
        shutil.copytree(ROOT / part, shard / part, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    shutil.copy(ROOT / "pyproject.toml", shard / "pyproject.toml")


def _env(shard: Path) -> dict:
    return {**os.environ, "PYTHONPATH": str(shard / "src"), "PYTHONDONTWRITEBYTECODE": "1"}


def _selection_args(target: str) -> list[str]:
    args = ["-q", "-p", "no:cacheprovider"]
    if DESELECT[target]:
        args += ["-k", DESELECT[target]]
    return args + list(TEST_SELECTION[target])


def _map(target: str, shard: Path) -> None:
    """Runs the whole selection once in `shard` under coverage (it must pass): `coverage.json` in the session folder."""
    print(f"[{target}] baseline under coverage: {' '.join(_selection_args(target))}", flush=True)
    command = [sys.executable, "-B", str(ROOT / "utils" / "mutation_testing.py"), "--map-coverage", target]
    subprocess.run(command, cwd=shard, env=_env(shard), check=True)


class _ContextPlugin:
    """Records, for each test, the lines of the overlay it executes (coverage's dynamic contexts). What a test's setup
    executes (`setUpClass`, fixtures) is recorded as `setup|<nodeid>`: it counts for every test of that class."""

    def __init__(self, coverage):
        self.coverage = coverage
        self.order: list[str] = []

    def pytest_collection_modifyitems(self, items):
        self.order = [item.nodeid for item in items]

    def pytest_runtest_setup(self, item):
        self.coverage.switch_context(f"setup|{item.nodeid}")

    def pytest_runtest_call(self, item):
        self.coverage.switch_context(item.nodeid)

    def pytest_runtest_teardown(self, item):
        self.coverage.switch_context(item.nodeid)

    def pytest_runtest_logfinish(self, nodeid):
        self.coverage.switch_context("")


def map_coverage(target: str) -> int:
    import coverage
    import pytest

    shard = Path.cwd()
    overlay = shard / "src" / "cache_crop_fix" / "overlay" / target
    cov = coverage.Coverage(data_file=None, include=[str(overlay / "*")], branch=False)
    cov.start()
    plugin = _ContextPlugin(cov)
    code = pytest.main(_selection_args(target), plugins=[plugin])
    cov.stop()
    if code != 0:
        raise SystemExit(f"[{target}] the tests fail on the unmutated overlay (exit {code})")
    data = cov.get_data()
    classes = {}
    for nodeid in plugin.order:
        classes.setdefault(nodeid.rsplit("::", 1)[0], []).append(nodeid)
    lines: dict[str, dict[int, list[str]]] = {}
    for path in data.measured_files():
        relative = str(Path(path).relative_to(overlay))
        by_line = {}
        for line, contexts in data.contexts_by_lineno(path).items():
            tests = set()
            for context in contexts:
                if context.startswith("setup|"):
                    tests.update(classes.get(context[len("setup|") :].rsplit("::", 1)[0], ()))
                elif context:
                    tests.add(context)
                else:
                    tests.add("<import>")
            by_line[line] = sorted(tests)
        lines[relative] = by_line
    (shard.parent / "coverage.json").write_text(json.dumps({"order": plugin.order, "lines": lines}))
    return 0


def _socket_path(shard: Path) -> str:
    return f"/tmp/mutation-{os.getuid()}-{zlib.crc32(str(shard).encode()):08x}.sock"


class _test_servers:
    """One test server per scratch copy (`serve`), for the duration of a session."""

    def __init__(self, target: str, shards: list[Path]):
        self.target, self.shards, self.processes = target, shards, []

    def __enter__(self):
        import socket

        for shard in self.shards:
            path = _socket_path(shard)
            (shard / "server.socket").write_text(path)
            command = [sys.executable, "-B", str(ROOT / "utils" / "mutation_testing.py"), "--serve", self.target]
            self.processes.append(subprocess.Popen(command, cwd=shard, env=_env(shard)))
        for shard in self.shards:
            path = _socket_path(shard)
            for _ in range(600):
                try:
                    with socket.socket(socket.AF_UNIX) as probe:
                        probe.connect(path)
                        probe.sendall(b'{"ping": true}\n')
                        probe.recv(100)
                    break
                except OSError:
                    time.sleep(0.5)
            else:
                raise SystemExit(f"[{self.target}] the test server of {shard} did not start")
        return self

    def __exit__(self, *exc):
        for process in self.processes:
            process.terminate()
            process.wait()


def _preload_modules(target: str) -> list[str]:
    """The third-party modules the tests import, imported once by the server before it forks a test run per mutant:
    torch, transformers and the transformers modules the tests and the overlay name (never `cache_crop_fix` or the
    tests themselves, which import the mutated overlay)."""
    modules = ["torch", "numpy", "pytest", "parameterized", "hypothesis", "transformers"]
    overlay = Path.cwd() / "src" / "cache_crop_fix" / "overlay" / target
    for path in overlay.glob("step*/**/*.py"):
        if path.name != "__init__.py":
            parts = path.relative_to(overlay).with_suffix("").parts[1:]
            modules.append(".".join(("transformers", *parts)))
    for path in (Path.cwd() / "tests").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "transformers":
                modules += [f"{node.module}:{alias.name}" for alias in node.names]
            elif isinstance(node, ast.Import):
                modules += [alias.name for alias in node.names if alias.name.split(".")[0] == "transformers"]
    return list(dict.fromkeys(modules))


def serve(target: str) -> int:
    """Imports torch and transformers once, then forks a fresh pytest run for each request: the child imports the
    (mutated) overlay from this scratch copy and applies it, as a new process would; only the start-up is shared."""
    import importlib
    import socket
    import warnings

    sys.dont_write_bytecode = True
    warnings.simplefilter("ignore")
    for name in _preload_modules(target):
        module, _, attribute = name.partition(":")
        try:
            imported = importlib.import_module(module)
            if attribute:
                getattr(imported, attribute, None)
        except Exception:  # noqa: BLE001 - a module the tests import but this release lacks: the child imports it
            pass
    warnings.resetwarnings()
    assert not any(name.startswith("cache_crop_fix") for name in sys.modules), "the server must not import the fix"
    shard = Path.cwd()
    path = _socket_path(shard)
    if os.path.exists(path):
        os.unlink(path)
    server = socket.socket(socket.AF_UNIX)
    server.bind(path)
    server.listen(4)
    while True:
        connection, _ = server.accept()
        with connection:
            request = json.loads(connection.makefile().readline())
            if request.get("ping"):
                connection.sendall(b"{}\n")
                continue
            pid = os.fork()
            if pid == 0:
                code = 3
                try:
                    server.close()
                    signal.alarm(int(TIMEOUT))  # a mutant that loops forever: killed (cosmic-ray gives up on it)
                    log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
                    os.dup2(log, 1)
                    os.dup2(log, 2)
                    code = int(pytest_main(request["args"]))
                except BaseException:  # noqa: BLE001 - report and exit non-zero
                    import traceback

                    traceback.print_exc()
                finally:
                    sys.stdout.flush()
                    sys.stderr.flush()
                    os._exit(code)
            _, status = os.waitpid(pid, 0)
            connection.sendall(json.dumps({"code": os.waitstatus_to_exitcode(status)}).encode() + b"\n")


BROKEN_SELECTION = "BROKEN SELECTION"


def pytest_main(args: list[str]) -> int:
    import pytest

    return pytest.main(args)


def _changed_line(pristine: Path, mutated: Path) -> int | None:
    old, new = pristine.read_text().splitlines(), mutated.read_text().splitlines()
    for index, (a, b) in enumerate(zip(old, new)):
        if a != b:
            return index + 1
    return None if len(old) == len(new) else min(len(old), len(new)) + 1


def _tests_for(work: Path, relative: str, line: int, source: str) -> tuple[list[str], str]:
    """The tests that can see a mutant at `line`: those that execute the innermost function containing it, or the
    whole selection for a line outside any function body (run at import: module level, decorators, signatures)."""
    data = json.loads((work / "coverage.json").read_text())
    order = data["order"]
    innermost = None
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if node.body[0].lineno <= line <= node.end_lineno:
                if innermost is None or node.body[0].lineno >= innermost.body[0].lineno:
                    innermost = node
    if innermost is None:
        return order, "outside any function body: the whole selection"
    covered = data["lines"].get(relative, {})
    tests = set()
    for number in range(innermost.body[0].lineno, innermost.end_lineno + 1):
        tests.update(covered.get(str(number), ()))
    if "<import>" in tests:
        return order, f"`{innermost.name}` runs at import: the whole selection"
    return [test for test in order if test in tests], f"the {len(tests)} tests that execute `{innermost.name}`"


def run_tests(target: str, phase: str = "all") -> int:
    """cosmic-ray's test command, run in a scratch copy with one mutant applied: runs, in its test server, the tests
    that execute the mutated function (`-x`), and exits with pytest's status."""
    import socket
    import tempfile

    shard = Path.cwd()
    work = shard.parent  # the session folder (one per target and mutant family)
    pristine = work / "pristine"
    overlay = shard / "src" / "cache_crop_fix" / "overlay" / target
    mutated = [
        (path, pristine / path.relative_to(overlay))
        for path in sorted(overlay.rglob("*.py"))
        if (pristine / path.relative_to(overlay)).read_text() != path.read_text()
    ]
    if len(mutated) != 1:
        print(f"expected one mutated file, found {[str(path) for path, _ in mutated]}: the whole selection")
        tests, why = json.loads((work / "coverage.json").read_text())["order"], "no single mutant"
    else:
        ((path, original),) = mutated
        line = _changed_line(original, path)
        tests, why = _tests_for(work, str(path.relative_to(overlay)), line, original.read_text())
        print(f"mutant at {path.relative_to(overlay)}:{line}: {why}")
    unmeasured = json.loads((work / "coverage.json").read_text()).get("unmeasured", [])
    tests = unmeasured + [test for test in tests if test not in unmeasured]
    if phase == "fast":
        tests = [
            test
            for test in tests
            if test.startswith(FAST_TESTS[target]) and not test.startswith(SLOW_TESTS.get(target, ()))
        ]
        print(f"first phase: {len(tests)} of them")
    if not tests:
        print("no test executes this code: the mutant survives")
        return 0
    args = ["-x", "-q", "-p", "no:cacheprovider", *tests]
    with tempfile.NamedTemporaryFile("r", suffix=".log") as log:
        with socket.socket(socket.AF_UNIX) as connection:
            connection.connect((shard / "server.socket").read_text())
            connection.sendall(json.dumps({"args": args, "log": log.name}).encode() + b"\n")
            code = json.loads(connection.makefile().readline())["code"]
        print(log.read()[-4000:])
    if code in (4, 5):
        # pytest's usage error (e.g. a test name not found) or no test collected: a broken selection, not a kill
        # (`recheck_survivors` stops at this line instead of recording the outcome)
        print(f"{BROKEN_SELECTION}: pytest exited with {code} for a selection of {len(tests)} tests")
    return code


def recheck_survivors(
    target: str, only: str | None = None, reuse_map: bool = False, family: str = "operator", fast: bool = False
) -> int:
    """Runs each survivor of the last session again, with the current tests copied into the scratch copy, and records
    the new outcome in the session (cosmic-ray's `mutate-and-test` applies the mutant, runs the tests, restores)."""
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import TestOutcome, WorkerOutcome, WorkResult

    work = _work(target, family)
    shards = sorted(work.glob("shard*"))
    if not shards:
        raise SystemExit(f"[{target}] no session to recheck: run `make mutate TARGET={target} FAMILY={family}` first")
    test_command = f"{sys.executable} -B {ROOT / 'utils' / 'mutation_testing.py'} --run-tests {target}"
    if fast:
        test_command += " --phase fast"  # the first phase again, with the tests added since (before the second phase)
    # The current tests, and which of them run what
    for shard in shards:
        shutil.rmtree(shard / "tests")
        shutil.copytree(ROOT / "tests", shard / "tests", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    if not reuse_map:
        _map(target, shards[0])
    else:
        # Tests added since the map was measured run for every survivor (what they execute is not known)
        command = [sys.executable, "-B", "-m", "pytest", "--collect-only", *_selection_args(target)]
        output = subprocess.run(command, cwd=shards[0], env=_env(shards[0]), capture_output=True, text=True).stdout
        collected = [line for line in output.splitlines() if "::" in line]
        data = json.loads((work / "coverage.json").read_text())
        measured = set(data["order"])
        data["unmeasured"] = [test for test in collected if test not in measured]
        # Tests renamed or removed since are not selected: pytest would stop at the unknown name with an error, which
        # would count as a kill (a renamed one is among the tests added since)
        current = set(collected)
        kept = [test for test in data["order"] if test in current]
        gone = len(data["order"]) - len(kept)
        data["order"] = kept
        (work / "coverage.json").write_text(json.dumps(data))
        print(
            f"[{target}] {len(data['unmeasured'])} tests added since the map run for every survivor; {gone} "
            "renamed or removed are no longer selected",
            flush=True,
        )

    def recheck_shard(shard: Path) -> None:
        env = _env(shard)
        with use_db(str(shard / "session.sqlite"), WorkDB.Mode.open) as db:
            survivors = [
                (item, result)
                for item, result in db.completed_work_items
                if result.worker_outcome != WorkerOutcome.SKIPPED
                and result.test_outcome == TestOutcome.SURVIVED
                and (
                    only is None
                    or re.search(
                        only,
                        f"{item.mutations[0].module_path}:{item.mutations[0].start_pos[0]} "
                        f"{item.mutations[0].operator_name}",
                    )
                )
            ]
            for item, result in survivors:
                (mutation,) = item.mutations
                if _argument(target, mutation, result) is not None:
                    continue  # argued equivalent: nothing to re-test
                if family == "semantic":
                    tested = _test_semantic(shard, mutation, test_command)
                    outcome, output = tested.test_outcome.value, tested.output
                else:
                    command = [sys.executable, "-m", "cosmic_ray.cli", "mutate-and-test"]
                    command += [str(mutation.module_path), mutation.operator_name, str(mutation.occurrence)]
                    command += [test_command]
                    run = subprocess.run(command, cwd=shard, env=env, capture_output=True, text=True, check=True)
                    outcome, output = json.loads(run.stdout)["test_outcome"], run.stdout
                if BROKEN_SELECTION in (output or ""):
                    raise SystemExit(
                        f"[{target}] {mutation.module_path}:{mutation.start_pos[0]}: the tests selected for it could "
                        "not run (a name not found?): recheck without `--reuse-map` to measure the map again"
                    )
                print(f"[{target}] {mutation.module_path}:{mutation.start_pos[0]} {mutation.operator_name}: {outcome}")
                db.set_result(
                    item.job_id,
                    WorkResult(
                        worker_outcome=WorkerOutcome.NORMAL,
                        test_outcome=TestOutcome(outcome),
                        output="rechecked with the current tests",
                        diff=result.diff,
                    ),
                )

    # One thread per shard: each re-tests its own survivors in its own copy
    with _test_servers(target, shards), concurrent.futures.ThreadPoolExecutor(len(shards)) as pool:
        list(pool.map(recheck_shard, shards))
    return report(target, shards, Path("src/cache_crop_fix/overlay") / target, None, 0, 0, test_command, len(shards))


def _argument(target: str, mutation, result) -> str | None:
    """The one-line argument in `utils/mutation_equivalents/<target>.py` for a survivor, if any."""
    name = str(Path(mutation.module_path).relative_to(Path("src/cache_crop_fix/overlay") / target))
    if mutation.operator_name.startswith("semantic/"):
        key = (name, mutation.operator_args["description"], mutation.operator_name)
        return _equivalents(target, "semantic").get(key)
    mutated = [
        line[1:].strip()
        for line in (result.diff or "").splitlines()
        if line.startswith("+") and not line.startswith("+++")
    ]
    return _equivalents(target, "operator").get((name, mutated[0] if mutated else "", mutation.operator_name))


def report_only(target: str, family: str = "operator") -> int:
    shards = sorted(_work(target, family).glob("shard*"))
    test_command = json.loads(
        re.search(r"^test-command = (.*)$", (shards[0] / "cosmic-ray.toml").read_text(), re.M).group(1)
    )
    return report(target, shards, Path("src/cache_crop_fix/overlay") / target, None, 0, 0, test_command, len(shards))


def _annotation_spans(tree: ast.AST) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    nodes = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            arguments = node.args
            for arg in [
                *arguments.posonlyargs,
                *arguments.args,
                *arguments.kwonlyargs,
                arguments.vararg,
                arguments.kwarg,
            ]:
                if arg is not None and arg.annotation is not None:
                    nodes.append(arg.annotation)
            if node.returns is not None:
                nodes.append(node.returns)
        elif isinstance(node, ast.AnnAssign):
            nodes.append(node.annotation)
    return [((n.lineno, n.col_offset), (n.end_lineno, n.end_col_offset)) for n in nodes]


def _definitions(tree: ast.Module) -> dict[tuple[str | None, str], tuple[int, int]]:
    """(class or None, name) -> line span of each method and module-level function."""
    spans = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            spans[None, node.name] = (node.lineno, node.end_lineno)
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef):
                    start = min([item.lineno, *(d.lineno for d in item.decorator_list)])
                    spans[node.name, item.name] = (start, item.end_lineno)
    return spans


def _superseded_spans(work: Path, overlay: Path) -> dict[str, list[tuple[int, int, str]]]:
    """For each overlay file, the line spans of definitions that a later step defines again (the patcher skips them)."""
    steps = sorted(p for p in (work / overlay).iterdir() if p.is_dir() and p.name.startswith("step"))
    by_module: dict[str, list[tuple[str, dict]]] = {}
    for step in steps:
        for path in sorted(step.rglob("*.py")):
            if path.name == "__init__.py" or path.parent.name == "pr":
                continue
            module = str(path.relative_to(step))
            by_module.setdefault(module, []).append(
                (str(path.relative_to(work)), _definitions(ast.parse(path.read_text())))
            )
    spans: dict[str, list[tuple[int, int, str]]] = {}
    for versions in by_module.values():
        for index, (path, definitions) in enumerate(versions):
            for key, (start, end) in definitions.items():
                later = [p for p, d in versions[index + 1 :] if key in d]
                if later:
                    step = later[-1].split("/")[4]
                    spans.setdefault(path, []).append(
                        (start, end, f"{'.'.join(filter(None, key))} (replaced by {step})")
                    )
    return spans


def _inside(position: tuple[int, int], span: tuple[tuple[int, int], tuple[int, int]]) -> bool:
    return span[0] <= tuple(position) < span[1]


def skip_mutants(
    session: Path, work: Path, overlay: Path, limit: int | None, only: str | None, shard: tuple[int, int] = (0, 1)
) -> dict[str, int]:
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import WorkerOutcome, WorkResult

    excluded = re.compile("|".join(f"(?:{pattern})" for pattern in EXCLUDED_OPERATORS))
    superseded = _superseded_spans(work, overlay)
    annotations = {}
    counts = {"annotation": 0, "superseded": 0, "operator left out": 0, "not selected": 0}
    selected = 0
    with use_db(str(session), WorkDB.Mode.open) as db:
        items = sorted(db.pending_work_items, key=lambda item: item.job_id)
        items.sort(key=lambda item: (str(item.mutations[0].module_path), item.mutations[0].start_pos))
        for item in items:
            (mutation,) = item.mutations
            path = str(mutation.module_path)
            if path not in annotations:
                annotations[path] = _annotation_spans(ast.parse((work / path).read_text()))
            line = mutation.start_pos[0]
            reason = None
            if any(_inside(mutation.start_pos, span) for span in annotations[path]):
                reason = "annotation"
            elif any(start <= line <= end for start, end, _ in superseded.get(path, ())):
                reason = "superseded"
            elif excluded.match(mutation.operator_name):
                reason = "operator left out"
            elif (only and not re.search(only, f"{path}:{line} {mutation.operator_name}")) or (
                limit is not None and selected >= limit
            ):
                reason = "not selected"
            if reason is None:
                selected += 1
                if (selected - 1) % shard[1] == shard[0]:
                    continue
                reason = "other shard"
            if reason != "other shard":
                counts[reason] += 1
            db.set_result(item.job_id, WorkResult(output=reason, worker_outcome=WorkerOutcome.SKIPPED))
    counts["run"] = selected
    return counts


def report(target, shards, overlay, _skipped, baseline_seconds, exec_seconds, test_command, jobs) -> int:
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import TestOutcome, WorkerOutcome

    family = "semantic" if shards[0].parent.name.endswith("-semantic") else "operator"
    rows = []
    skipped = dict.fromkeys(("annotation", "superseded", "operator left out", "not selected"), 0)
    pending = 0
    for shard in shards:
        with use_db(str(shard / "session.sqlite"), WorkDB.Mode.open) as db:
            pending += len(list(db.pending_work_items))
            for item, result in db.completed_work_items:
                if result.worker_outcome == WorkerOutcome.SKIPPED:
                    if result.output in skipped:
                        skipped[result.output] += 1 / len(shards)  # every shard skips the same mutants
                    continue
                (mutation,) = item.mutations
                rows.append((mutation, result))
    skipped = {reason: round(count) for reason, count in skipped.items()}
    rows.sort(key=lambda row: (str(row[0].module_path), row[0].start_pos, row[0].operator_name))
    work = shards[0]
    killed = [r for r in rows if r[1].test_outcome == TestOutcome.KILLED]
    incompetent = [r for r in rows if r[1].test_outcome == TestOutcome.INCOMPETENT]
    survived = [r for r in rows if r[1].test_outcome == TestOutcome.SURVIVED]
    rechecked = sum(r[1].output == "rechecked with the current tests" for r in rows)
    per_mutant = exec_seconds * jobs / max(len(rows), 1)
    total = len(rows) + pending + skipped["annotation"] + skipped["superseded"] + skipped["operator left out"]
    total += skipped["not selected"]
    lines = [
        f"# Mutation testing of `overlay/{target}` (cosmic-ray, {family} family)",
        "",
        f"Test command: `{test_command}`",
        "",
        f"Baseline: {baseline_seconds:.0f} s. Mutants run: {len(rows)} in {exec_seconds:.0f} s with {jobs} job(s) "
        f"({per_mutant:.1f} s of one job per mutant).",
        "",
        "| mutants | run | killed | incompetent | survived | not run yet | skipped: annotation | superseded | "
        "operator left out |",
        "|---|---|---|---|---|---|---|---|---|",
        f"| {total} | {len(rows)} | {len(killed)} | {len(incompetent)} | {len(survived)} | {pending} | "
        f"{skipped['annotation']} | {skipped['superseded']} | {skipped['operator left out']} |",
        "",
    ]
    if rechecked:
        lines += [f"{rechecked} survivors of the run were re-tested with the current tests (`--recheck`).", ""]
    if pending:
        lines += [f"Interrupted: {pending} mutants were not run (`cosmic-ray exec` in a shard resumes them).", ""]
    if skipped["not selected"]:
        lines += [f"Partial run: {skipped['not selected']} mutants not selected (`--limit`/`--only`).", ""]
    unexplained = 0
    by_file: dict[str, list[int]] = {}
    for mutation, result in rows:
        name = str(mutation.module_path.relative_to(overlay))
        by_file.setdefault(name, [0, 0])
        by_file[name][0] += 1
        by_file[name][1] += result.test_outcome == TestOutcome.SURVIVED
    lines += ["| file | run | survived |", "|---|---|---|"]
    lines += [f"| `{name}` | {run} | {alive} |" for name, (run, alive) in sorted(by_file.items())]
    lines += ["", "## Survivors", ""]
    for mutation, result in survived:
        name = str(mutation.module_path.relative_to(overlay))
        reason = _argument(target, mutation, result)
        if reason is None:
            unexplained += 1
        description = mutation.operator_args.get("description")
        lines += [
            f"- `{name}:{mutation.start_pos[0]}` {mutation.operator_name}: "
            + (f"{description}: " if description else "")
            + (f"equivalent: {reason}" if reason else "**unexplained**"),
            "",
            "```diff",
            *(result.diff or "").strip().splitlines()[2:],
            "```",
            "",
        ]
    text = "\n".join(lines)
    (work.parent / "report.md").write_text(text)
    print(text)
    print(f"[{target}] report: {work.parent / 'report.md'}")
    return 1 if unexplained else 0


if __name__ == "__main__":
    sys.exit(main())
