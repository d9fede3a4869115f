# The metadata lives in pyproject.toml. This file adds `cache_crop_fix_bootstrap.pth` at the top of the wheel (so it
# lands in site-packages, is listed in RECORD and `pip uninstall` removes it) for every way of installing: regular and
# git installs and built wheels (through `build_py`), and editable installs (through `editable_wheel`). Its content is
# `PTH_LINE` of src/cache_crop_fix/_bootstrap.py, read here without importing the package.
import os
import runpy

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py


_BOOTSTRAP = runpy.run_path(
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "src", "cache_crop_fix", "_bootstrap.py")
)
PTH_NAME, PTH_LINE = _BOOTSTRAP["PTH_NAME"], _BOOTSTRAP["PTH_LINE"]


class build_py_with_pth(build_py):
    """Also writes the `.pth` at the root of the build directory, which becomes the root of the wheel."""

    def run(self):
        super().run()
        if not getattr(self, "editable_mode", False):
            with open(self._pth_path(), "w", encoding="utf-8") as file:
                file.write(PTH_LINE)

    def get_outputs(self, include_bytecode=True):
        outputs = super().get_outputs(include_bytecode)
        if not getattr(self, "editable_mode", False):
            outputs.append(self._pth_path())
        return outputs

    def _pth_path(self):
        return os.path.join(self.build_lib, PTH_NAME)


cmdclass = {"build_py": build_py_with_pth}

try:
    from setuptools.command.editable_wheel import editable_wheel
except ImportError:  # setuptools < 64: no PEP 660 editable installs (pyproject.toml requires >= 64)
    editable_wheel = None

if editable_wheel is not None and hasattr(editable_wheel, "_select_strategy"):

    class _StrategyWithPth:
        """Wraps setuptools' editable strategy (a `.pth` or a finder pointing at src/) to add our `.pth` too."""

        def __init__(self, strategy):
            self._strategy = strategy

        def __enter__(self):
            self._strategy.__enter__()
            return self

        def __exit__(self, *exc_info):
            return self._strategy.__exit__(*exc_info)

        def __call__(self, wheel, files, mapping):
            self._strategy(wheel, files, mapping)
            wheel.writestr(PTH_NAME, PTH_LINE.encode("utf-8"))

    class editable_wheel_with_pth(editable_wheel):
        def _select_strategy(self, *args, **kwargs):
            return _StrategyWithPth(super()._select_strategy(*args, **kwargs))

    cmdclass["editable_wheel"] = editable_wheel_with_pth


setup(package_dir={"": "src"}, packages=find_packages("src"), cmdclass=cmdclass)
