"""Applies the fix for the whole test session; `pytest --stock` runs the same tests on stock transformers instead.

`--stock` is how we show that a test proves the fix: it must fail there.
"""

import pytest

import cache_crop_fix


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
