"""`make never-worse` (utils/never_worse.py): how a case of the upstream series alone is judged against stock 5.25.0,
and `CACHE_CROP_FIX_SERIES=upstream`, which installs the series without the fork steps."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

import transformers
from cache_crop_fix.targets import target_for


ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "utils"))
import never_worse  # noqa: E402


@pytest.mark.parametrize(
    "stock, series, verdict",
    [
        ("passed", "passed", "passes"),
        ("AssertionError", "passed", "passes"),
        ("IndexError", "IndexError", "fails as on 5.25.0"),
        ("AssertionError", "AssertionError", "fails as on 5.25.0"),
        ("IndexError", "ValueError", "refused clearly (5.25.0 fails)"),
        ("passed", "AssertionError", "WORSE"),  # a case main gets right
        ("passed", "ValueError", "WORSE"),  # refusing what main does right
        ("RuntimeError", "AssertionError", "WORSE"),  # a crash turned into wrong tokens or a wrong state
        (None, "AssertionError", "WORSE"),  # a case stock did not run
    ],
)
def test_a_case_is_never_worse_than_stock(stock, series, verdict):
    assert never_worse.classify(stock, series) == verdict


def test_outcomes_read_the_exception_of_each_case(tmp_path):
    report = tmp_path / "report.xml"
    report.write_text(
        '<testsuites><testsuite name="pytest">'
        '<testcase classname="tests.test_x.XTest" name="test_a"/>'
        '<testcase classname="tests.test_x.XTest" name="test_b"><failure message="assert [1] == [2]"/></testcase>'
        '<testcase classname="tests.test_x.XTest" name="test_c"><error message="torch.OutOfMemoryError: no"/></testcase>'
        '<testcase classname="tests.test_x.XTest" name="test_d"><failure message="ValueError: refused"/></testcase>'
        '<testcase classname="tests.test_x.XTest" name="test_d"><skipped message="subtest"/></testcase>'
        "</testsuite></testsuites>"
    )
    assert never_worse.outcomes(report) == {
        "XTest.test_a": "passed",
        "XTest.test_b": "AssertionError",
        "XTest.test_c": "OutOfMemoryError",
        "XTest.test_d": "ValueError",
        "XTest.test_d#2": "skipped",
    }


def _patched(series: str | None) -> list[str]:
    env = {key: value for key, value in os.environ.items() if key != "CACHE_CROP_FIX_SERIES"}
    if series is not None:
        env["CACHE_CROP_FIX_SERIES"] = series
    code = "import cache_crop_fix; print('\\n'.join(cache_crop_fix.status().patches))"
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert result.returncode == 0 or series not in (None, "upstream"), result.stderr
    return result.stdout.split() if result.returncode == 0 else [result.stderr.strip().splitlines()[-1]]


def test_series_installs_the_upstream_steps_only():
    target = target_for(transformers.__version__)
    everything, series = _patched(None), _patched("upstream")
    assert set(series) <= set(everything)
    # Only the fork steps add what the series lacks (5.24 and 5.14 have none)
    assert (set(series) == set(everything)) == all(step.upstream for step in target.steps)
    assert _patched("fork") == ["ValueError: CACHE_CROP_FIX_SERIES must be unset or `upstream`, not 'fork'"]
