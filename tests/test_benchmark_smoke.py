"""Smoke test of `benchmarks/bench_crop.py`: it runs at tiny sizes and writes its report. No timing is asserted.

The benchmark switches between stock and fixed itself (`cache_crop_fix.revert()` / `apply()`), so it runs in a
subprocess, away from this session's patch state, and passes with or without `--stock`.
"""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from .compat import TARGET


REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "benchmarks" / "bench_crop.py"


OTHER_TARGET = "v5_24" if TARGET.name == "v5_14" else "v5_14"
OTHER_SECTION = f"<!-- bench_crop {OTHER_TARGET}:start -->\nthe other target\n<!-- bench_crop {OTHER_TARGET}:end -->"
HISTORY_SECTION = "<!-- bench_assisted_history:start -->\nhistory\n<!-- bench_assisted_history:end -->\n"
EXISTING_PAGE = f"# Benchmarks\n\n{OTHER_SECTION}\n\n{HISTORY_SECTION}"


@pytest.fixture(scope="module")
def quick_report(tmp_path_factory):
    out_dir = tmp_path_factory.mktemp("bench")
    # A page with the other target's section and another script's section: both must be kept
    (out_dir / "benchmarks.md").write_text(EXISTING_PAGE, encoding="utf-8")
    completed = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--out-dir", str(out_dir)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO,
    )
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]
    report = out_dir / "benchmarks.md"
    assert report.is_file()
    return out_dir, report.read_text(encoding="utf-8")


def table_rows(text: str, heading: str) -> list[dict[str, str]]:
    """The body rows of the first Markdown table after `heading`, as dicts keyed by the header cells."""
    section = text.split(heading, 1)[1]
    lines = []
    for line in section.splitlines():
        if line.startswith("|"):
            lines.append([cell.strip() for cell in line.strip().strip("|").split("|")])
        elif lines:
            break
    header, body = lines[0], lines[2:]  # the second line is the separator
    return [dict(zip(header, row, strict=True)) for row in body]


def test_report_has_every_section(quick_report):
    _, text = quick_report
    for heading in (
        "## Targets",
        "## How to run",
        "## Method",
        "### `DynamicCache`",
        "### `crop(0)`",
        "### Sliding-window and hybrid caches",
        "### Where the fixed path spends its time",
        "## Zero-copy",
        "## Scaling with sequence length",
        "## End to end",
        "## Import cost",
    ):
        assert heading in text, heading
    assert "--quick" in text  # the exact command of the run is recorded
    assert "Quick run" in text


def test_latency_table_covers_sizes_ops_and_variants(quick_report):
    _, text = quick_report
    rows = table_rows(text, "### `DynamicCache`")
    cells = {(row["layers"], row["tokens"], row["op"]) for row in rows}
    # --quick sizes: 1 and 2 layers, 16 and 64 tokens
    for layers in ("1", "2"):
        for tokens in ("16", "64"):
            for op in ("`crop(-1)`", "`crop(-4)`", "`crop(-L-1)`"):
                assert (layers, tokens, op) in cells
    number = re.compile(r"^\d+\.\d+ \(\d+\.\d+–\d+\.\d+\)$")  # median (IQR)
    for row in rows:
        for column in ("stock µs/call", "fixed µs/call", "floor µs/call", "fixed/stock", "fixed/floor"):
            assert number.match(row[column]), (column, row)
    kinds = {row["cache"] for row in table_rows(text, "### Sliding-window and hybrid caches")}
    assert kinds == {"sliding", "hybrid"}


def test_crop_results_show_the_fix(quick_report):
    _, text = quick_report
    rows = {(row["cache"], row["tokens"]): row for row in table_rows(text, "### What each crop left")}
    if TARGET.name == "v5_14":
        # Stock keeps a token on an oversized crop and everything on crop(0); the fix empties the cache
        expected = {"`crop(-1)`": "15 / 15", "`crop(-4)`": "12 / 12", "`crop(-L-1)`": "15 / 0", "`crop(0)`": "16 / 0"}
    else:
        # 5.24: dynamic and sliding layers already clamp, and `crop(0)` removes nothing in both
        expected = {"`crop(-1)`": "15 / 15", "`crop(-4)`": "12 / 12", "`crop(-L-1)`": "0 / 0", "`crop(0)`": "16 / 16"}
    for kind in ("dynamic", "sliding"):
        assert {op: rows[(kind, "16")][op] for op in expected} == expected


def test_zero_copy_and_same_generations(quick_report):
    _, text = quick_report
    zero_copy = table_rows(text, "## Zero-copy")
    assert {row["variant"] for row in zero_copy} == {"stock", "fixed"}
    for row in zero_copy:
        assert row["same storage"] == "yes", row
        assert row["bytes allocated by the crop"] == "0", row
    e2e = table_rows(text, "## End to end")
    assert [row["method"] for row in e2e] == ["assisted", "prompt lookup", "greedy (control, no crop)"]
    # Greedy decoding with prompts that stock handles: the fix generates the same tokens
    assert all(row["same tokens as stock"] == "yes" for row in e2e)


def test_section_of_this_target_keeps_the_others(quick_report):
    _, text = quick_report
    start, end = f"<!-- bench_crop {TARGET.name}:start -->", f"<!-- bench_crop {TARGET.name}:end -->"
    assert text.count(start) == text.count(end) == 1
    assert OTHER_SECTION in text and text.endswith(HISTORY_SECTION)
    # The main target's section comes first
    assert text.index("<!-- bench_crop v5_24:start -->") < text.index("<!-- bench_crop v5_14:start -->")


def test_plot_is_written(quick_report):
    out_dir, text = quick_report
    pytest.importorskip("matplotlib")
    assert (out_dir / f"crop_latency_{TARGET.name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"![Cache.crop latency](crop_latency_{TARGET.name}.png)" in text


def test_assisted_history_benchmark_runs_and_writes_its_section(tmp_path):
    """`benchmarks/bench_assisted_history.py --quick`: its section is added to an existing report, then replaced."""
    script = REPO / "benchmarks" / "bench_assisted_history.py"
    report = tmp_path / "benchmarks.md"
    report.write_text("# Benchmarks\n\nOther sections.\n", encoding="utf-8")
    for _ in range(2):
        completed = subprocess.run(
            [sys.executable, str(script), "--quick", "--prompt-lengths", "16", "--out-dir", str(tmp_path)],
            capture_output=True,
            text=True,
            timeout=600,
            cwd=REPO,
        )
        assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]
    text = report.read_text(encoding="utf-8")
    assert text.startswith("# Benchmarks\n\nOther sections.\n")
    assert text.count("<!-- bench_assisted_history:start -->") == 1
    rows = table_rows(text, "## Assisted decoding with linear attention assistants")
    assert {(row["assistant"], row["rollback"]) for row in rows} >= {
        ("qwen3_next", "history"),
        ("qwen3_next", "full"),
        ("lfm2", "history"),
        ("lfm2", "full"),
        ("llama", "exact"),
    }
    for row in rows:
        if row["rollback"] in ("history", "exact"):
            assert row["re-encodes"] == "0", row
        # Stock 5.14 raises at the first rollback of a linear attention assistant (its cache does not record its past)
        if row["rollback"] and not row["time (s)"].startswith("raises"):
            assert row["output = greedy"] == "yes", row


def test_assisted_calls_benchmark_writes_its_section(tmp_path):
    """`benchmarks/bench_assisted_calls.py --quick` writes its section: greedy, stock and fixed rows, outputs equal."""
    completed = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "bench_assisted_calls.py"), "--quick", "--out-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO,
    )
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]
    section = (tmp_path / "benchmarks.md").read_text(encoding="utf-8")
    assert f"<!-- bench_assisted_calls_{TARGET.name}:start -->" in section
    rows = [line for line in section.splitlines() if line.startswith("| assisted, ")]
    assert [row.split(" | ")[0] for row in rows] == ["| assisted, stock", "| assisted, fixed"]
    assert all(row.endswith("| yes |") for row in rows), rows
