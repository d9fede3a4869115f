"""Applies the fix for the whole test session; `pytest --stock` runs the same tests on stock transformers instead.

`--stock` is how we show that a test proves the fix: it must fail there. The upstream-style tests of each target live in
`tests/<target>/` (mirroring upstream's `tests/`); only those of the target matching the installed transformers run.
"""

import pytest

import cache_crop_fix
import transformers
from cache_crop_fix.targets import TARGETS, target_for


_TARGET = target_for(transformers.__version__)
collect_ignore = [target.name for target in TARGETS if target is not _TARGET]


def pytest_addoption(parser):
    parser.addoption(
        "--stock", action="store_true", help="revert the fix before the tests run (tests that prove it must fail)"
    )


def pytest_configure(config):
    if config.getoption("--stock"):
        cache_crop_fix.revert()
    else:
        cache_crop_fix.apply()


@pytest.fixture
def stock_mode(request):
    return request.config.getoption("--stock")
