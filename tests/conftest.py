"""Applies the fix for the whole test session; `pytest --stock` runs the same tests on stock transformers instead.

`--stock` is how we show that a test proves the fix: it must fail there. The upstream-style tests of each target live in
`tests/<target>/` (mirroring upstream's `tests/`); only those of the target matching the installed transformers run.
"""

import warnings

import pytest


# A model module that the fix leaves stock (`patcher._patch_model_module` warns when the overlay does not match it) would
# let its tests pass on stock transformers: in the tests it is an error, when the import below applies the fix to the
# modules already imported, and when a test imports one (`pytest_configure`)
UNPATCHED_WARNING = r"cache_crop_fix left .* unpatched"
warnings.filterwarnings("error", message=UNPATCHED_WARNING, category=RuntimeWarning)

import cache_crop_fix  # noqa: E402
import transformers  # noqa: E402
from cache_crop_fix.targets import TARGETS, target_for  # noqa: E402


_TARGET = target_for(transformers.__version__)
collect_ignore = [target.name for target in TARGETS if target is not _TARGET]


def pytest_addoption(parser):
    parser.addoption(
        "--stock", action="store_true", help="revert the fix before the tests run (tests that prove it must fail)"
    )


def pytest_configure(config):
    config.addinivalue_line("filterwarnings", f"error:{UNPATCHED_WARNING}:RuntimeWarning")
    if config.getoption("--stock"):
        cache_crop_fix.revert()
    else:
        cache_crop_fix.apply()


@pytest.fixture
def stock_mode(request):
    return request.config.getoption("--stock")


_stock_outcomes = {"failed": {}, "passed": 0, "active": False}


def pytest_sessionstart(session):
    _stock_outcomes["active"] = session.config.getoption("--stock")


def pytest_runtest_logreport(report):
    if not _stock_outcomes["active"]:
        return
    if report.failed and report.when in ("setup", "call"):
        from tests.stock_evidence import classify

        _stock_outcomes["failed"][report.nodeid] = classify(report.nodeid)
    elif report.passed and report.when == "call":
        _stock_outcomes["passed"] += 1


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """Under `--stock`: why the tests fail there (see `tests/stock_evidence.py`)."""
    if not config.getoption("--stock"):
        return
    failed = _stock_outcomes["failed"]
    counts = {}
    for category in failed.values():
        counts[category] = counts.get(category, 0) + 1
    terminalreporter.section("stock evidence (tests/stock_evidence.py)")
    terminalreporter.write_line(
        f"failed on stock: {len(failed)} = behaviour {counts.get('behaviour', 0)} + api {counts.get('api', 0)} + "
        f"wording {counts.get('wording', 0)} + tooling {counts.get('tooling', 0)} + unclassified {counts.get(None, 0)}; "
        "passed on stock: "
        f"{_stock_outcomes['passed']}"
    )
    for nodeid, category in failed.items():
        if category is None:
            terminalreporter.write_line(f"unclassified: {nodeid}")
