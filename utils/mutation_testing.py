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

Every survivor must be killed by a test or be listed in `EQUIVALENT` with a one-line argument; the report flags the
others as unexplained, and the script exits non-zero if there is any.
"""

from __future__ import annotations

import argparse
import ast
import concurrent.futures
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path


ROOT = Path(__file__).resolve().parent.parent
OVERLAY = ROOT / "src" / "cache_crop_fix" / "overlay"
BUILD = ROOT / "build" / "mutation"

# The tests that run against each mutant: fast, and covering every overlay file (ordered so that most mutants die in
# the first seconds; `-x` stops at the first failure). `{target}` is the target's test folder.
TEST_SELECTION = (
    "tests/{target}/utils/test_cache_utils.py",
    "tests/{target}/utils",
    "tests/test_call_sites.py",
    "tests/test_stateful.py",
    "tests/test_stateful_hybrid.py",
    "tests/test_generation.py::AssistedGenerationCropTest::test_assistant_model_matches_greedy_llama_prompt_1",
    "tests/test_generation.py::AssistedGenerationCropTest::test_assistant_model_matches_greedy_gemma2_prompt_7",
    "tests/test_generation.py::AssistedGenerationCropTest::test_sliding_window_is_crossed_mistral",
    "tests/test_generation_hybrid.py::HybridAssistedGenerationTest::test_hybrid_assistant_matches_greedy_1_qwen3_next",
    "tests/test_generation_hybrid.py::HybridAssistedGenerationTest::test_hybrid_assistant_matches_greedy_2_lfm2",
    "tests/test_generation_hybrid.py::AssistantRollbackModeTest",
    "tests/{target}/generation",
)
# Deselected for speed: the quanto/hqq backend tests build native kernels (minutes on a cold cache); the in-repo
# quantizer tests of the same `crop` run instead.
DESELECT = "not QuantizedBackendsCropTest"
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

# Survivors argued equivalent, keyed by (file relative to the target's overlay, the mutated line as cosmic-ray writes it,
# stripped, operator).
# The argument is the one line the docs show for it.
EQUIVALENT: dict[tuple[str, str, str], str] = {
    (
        "step3_atomic/generation/candidate_generator.py",
        "self.assistant_kwargs, input_ids.shape[1], self.assistant_model.config.is_encoder_decoder",
        "core/ReplaceUnaryOperator_Delete_USub",
    ): "`input_ids` is always 2-D (batch, sequence) here, so `shape[1]` is `shape[-1]` (upstream's own line).",
    (
        "step5_quantized/cache_utils.py",
        "residual_length = self.keys.shape[-2] if self.keys.dim() == 4 else -1",
        "core/NumberReplacer",
    ): "with an empty residual part `new_length < seq_length <= quantized_length` either way, so the same "
    "re-quantizing branch runs, which does not read `quantized_length`.",
    (
        "step1_clamp/cache_utils.py",
        "if self.is_indexer_initialized and self.indexer_keys.numel() >= 0 and self.indexer_keys.shape[1] > new_length:",
        "core/ReplaceComparisonOperator_Gt_GtE",
    ): "indexer keys are only empty as a 3-D tensor (`update_indexer` concatenates right after its lazy "
    "initialization), and then `shape[1] > new_length` is false either way.",
    (
        "step1_clamp/models/minimax_m3_vl/modeling_minimax_m3_vl.py",
        "if self.idx_keys is not None and self.idx_keys.shape[-2] >= new_length:",
        "core/ReplaceComparisonOperator_Gt_GtE",
    ): "when the lengths are equal the extra slice `[..., :new_length, :]` keeps every index key (same values).",
    (
        "step2_deprecate/models/pi0/modeling_pi0.py",
        "position_ids=attention_mask.cumsum(1) - 1 if attention_mask is not None else None,",
        "core/ReplaceUnaryOperator_Delete_USub",
    ): "the attention mask is 2-D (batch, sequence), so `cumsum(1)` is `cumsum(-1)` (upstream's own line).",
    (
        "step6_models/models/deepseek_v4/modeling_deepseek_v4.py",
        "buffered_length = -1 if buffered_kv is None else buffered_kv.shape[1]",
        "core/NumberReplacer",
    ): "only the `0` matters here: `buffered_length` is read only when `buffered_kv is not None` (the shape "
    "mutants of this line are killed).",
    (
        "step1_clamp/cache_utils.py",
        "if not max_length > 0 and max_length >= self.keys.shape[-2]:",
        "core/AddNot",
    ): "the early return only skips a slice that keeps everything (`[..., :max_length, :]` with `max_length` at "
    "least the length); for `max_length <= 0` the condition is false either way (an empty layer returned above).",
    (
        "step6_models/models/deepseek_v4/modeling_deepseek_v4.py",
        "new_length = max(seq_length + max_length, 0) if max_length <= 0 else min(max_length, seq_length)",
        "core/ReplaceComparisonOperator_Lt_LtE",
    ): "only `max_length == 0` takes the other branch: `new_length` is then the length (nothing to remove) instead "
    "of 0 (a full rollback), and both return before any check.",
    (
        "step1_clamp/cache_utils.py",
        "if max_length > 1 and max_length >= self.keys.shape[-2]:",
        "core/NumberReplacer",
    ): "for `max_length == 1` the early return only skips `[..., :1, :]` of a layer of at most 1 token: the same values.",
    (
        "step1_clamp/cache_utils.py",
        "if max_length > 0 and max_length > self.keys.shape[-2]:",
        "core/ReplaceComparisonOperator_GtE_Gt",
    ): "when `max_length` equals the length the skipped slice `[..., :max_length, :]` keeps every token.",
}


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
    args = parser.parse_args(argv)

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
            status |= recheck_survivors(name, args.only)
        elif args.report:
            status |= report_only(name)
        else:
            status |= run_target(name, args.limit, args.only, args.dry_run, args.jobs)
    return status


def run_target(target: str, limit: int | None, only: str | None, dry_run: bool = False, jobs: int = 1) -> int:
    work = BUILD / target
    shutil.rmtree(work, ignore_errors=True)
    overlay = Path("src/cache_crop_fix/overlay") / target
    selection = " ".join(test.format(target=target) for test in TEST_SELECTION)
    test_command = f"{sys.executable} -B -m pytest -x -q -p no:cacheprovider -k '{DESELECT}' {selection}"
    cosmic_ray = [sys.executable, "-m", "cosmic_ray.cli"]
    # One scratch copy per job: cosmic-ray writes each mutant into the files of its copy
    shards = [work / f"shard{index}" for index in range(jobs)]
    for shard in shards:
        shard.mkdir(parents=True)
        for part in ("src", "tests"):
            shutil.copytree(ROOT / part, shard / part, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        shutil.copy(ROOT / "pyproject.toml", shard / "pyproject.toml")
        files = sorted(
            str(path.relative_to(shard))
            for path in (shard / overlay).rglob("*.py")
            if path.name != "__init__.py" and path.stat().st_size > 0
        )
        (shard / "cosmic-ray.toml").write_text(
            "[cosmic-ray]\n"
            f"module-path = {json.dumps(files)}\n"
            f"timeout = {TIMEOUT}\n"
            "excluded-modules = []\n"
            f"test-command = {json.dumps(test_command)}\n"
            '[cosmic-ray.distributor]\nname = "local"\n'
        )

    def env(shard: Path) -> dict:
        return {**os.environ, "PYTHONPATH": str(shard / "src"), "PYTHONDONTWRITEBYTECODE": "1"}

    skipped = {}
    for index, shard in enumerate(shards):
        subprocess.run(
            [*cosmic_ray, "init", "cosmic-ray.toml", "session.sqlite"], cwd=shard, env=env(shard), check=True
        )
        skipped = skip_mutants(shard / "session.sqlite", shard, overlay, limit, only, (index, jobs))
    print(f"[{target}] mutants: {skipped}, in {jobs} job(s)", flush=True)
    if dry_run:
        return 0
    started = time.monotonic()
    print(f"[{target}] baseline: {test_command}", flush=True)
    subprocess.run([*cosmic_ray, "baseline", "cosmic-ray.toml"], cwd=shards[0], env=env(shards[0]), check=True)
    baseline_seconds = time.monotonic() - started
    started = time.monotonic()
    processes = [
        subprocess.Popen([*cosmic_ray, "exec", "cosmic-ray.toml", "session.sqlite"], cwd=shard, env=env(shard))
        for shard in shards
    ]
    if any(process.wait() for process in processes):
        raise SystemExit(f"[{target}] cosmic-ray exec failed")
    exec_seconds = time.monotonic() - started
    return report(target, shards, overlay, skipped, baseline_seconds, exec_seconds, test_command, jobs)


def recheck_survivors(target: str, only: str | None = None) -> int:
    """Runs each survivor of the last session again, with the current tests copied into the scratch copy, and records
    the new outcome in the session (cosmic-ray's `mutate-and-test` applies the mutant, runs the tests, restores)."""
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import TestOutcome, WorkerOutcome, WorkResult

    work = BUILD / target
    shards = sorted(work.glob("shard*"))
    if not shards:
        raise SystemExit(f"[{target}] no session to recheck: run `make mutate TARGET={target}` first")
    # The current test selection, with the current tests
    selection = " ".join(test.format(target=target) for test in TEST_SELECTION)
    test_command = f"{sys.executable} -B -m pytest -x -q -p no:cacheprovider -k '{DESELECT}' {selection}"

    def recheck_shard(shard: Path) -> None:
        shutil.rmtree(shard / "tests")
        shutil.copytree(ROOT / "tests", shard / "tests", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        env = {**os.environ, "PYTHONPATH": str(shard / "src"), "PYTHONDONTWRITEBYTECODE": "1"}
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
                command = [sys.executable, "-m", "cosmic_ray.cli", "mutate-and-test"]
                command += [str(mutation.module_path), mutation.operator_name, str(mutation.occurrence), test_command]
                output = subprocess.run(command, cwd=shard, env=env, capture_output=True, text=True, check=True).stdout
                outcome = json.loads(output)["test_outcome"]
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
    with concurrent.futures.ThreadPoolExecutor(len(shards)) as pool:
        list(pool.map(recheck_shard, shards))
    return report(target, shards, Path("src/cache_crop_fix/overlay") / target, None, 0, 0, test_command, len(shards))


def report_only(target: str) -> int:
    shards = sorted((BUILD / target).glob("shard*"))
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
            if path.name == "__init__.py":
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
        f"# Mutation testing of `overlay/{target}` (cosmic-ray)",
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
        mutated = [
            line[1:].strip()
            for line in (result.diff or "").splitlines()
            if line.startswith("+") and not line.startswith("+++")
        ]
        reason = EQUIVALENT.get((name, mutated[0] if mutated else "", mutation.operator_name))
        if reason is None:
            unexplained += 1
        lines += [
            f"- `{name}:{mutation.start_pos[0]}` {mutation.operator_name}: "
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
