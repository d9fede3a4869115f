"""
Opt-in activation without code changes: with `CACHE_CROP_FIX=1` in the environment, any Python process that imports
`transformers.cache_utils` gets the fix, as if it had run `import cache_crop_fix`.

`cache_crop_fix_bootstrap.pth` (installed next to the package, its content is `PTH_LINE` below) runs at interpreter
start-up. When `CACHE_CROP_FIX` is set and non-empty, it loads this file under the name `_cache_crop_fix_bootstrap`,
without importing the `cache_crop_fix` package (importing the package applies the fix, which imports transformers and
torch), and calls `install()`. This module uses only the standard library and does nothing at import time.

`install()` puts a finder at the front of `sys.meta_path`. It watches the imports of transformers modules; once
`transformers.cache_utils` has executed and the outermost transformers import in progress has returned (so no
transformers module is half-initialised, e.g. `generation.utils` or a model file that imported `cache_utils`), it
removes itself and imports `cache_crop_fix`, which applies the fix. All of this happens before the statement that
imported transformers returns to the program. If `transformers.cache_utils` was already imported, `install()` applies
the fix at once.

Nothing here may break start-up or `import transformers`: any failure is reported once on stderr (the warnings
machinery is not used because `-W error` would turn it into an exception inside the user's import) and transformers
stays stock. An unsupported transformers is reported by `cache_crop_fix` itself (a `RuntimeWarning`).
"""

import _thread
import os
import sys


ENV_VAR = "CACHE_CROP_FIX"
MODULE_NAME = "_cache_crop_fix_bootstrap"  # the name this file has in `sys.modules` when the `.pth` loaded it
PTH_NAME = "cache_crop_fix_bootstrap.pth"
TRUE_VALUES = frozenset({"1", "true", "yes", "on"})
FALSE_VALUES = frozenset({"", "0", "false", "no", "off"})

_UPSTREAM = "transformers"
_TRIGGER = "transformers.cache_utils"
_PACKAGE = "cache_crop_fix"

# Run by `site` for the `.pth` line (its `exec` string), in a fresh namespace. Only the standard library is imported.
# `site` processes the `.pth` files of a venv twice (CPython 3.11): the second time finds the module and does nothing.
# A failure leaves `None` under the module's name, so that it is reported once and `status` can tell.
_PTH_CODE = f"""\
import os, sys
if {MODULE_NAME!r} not in sys.modules:
    try:
        try:  # what importlib.util re-exports, already loaded: importing importlib.util would cost ~3 ms of start-up
            from _frozen_importlib import _find_spec as find_spec, module_from_spec
            from _frozen_importlib_external import spec_from_file_location
        except ImportError:
            from importlib.util import find_spec, module_from_spec, spec_from_file_location
        package = find_spec({_PACKAGE!r}, None)
        spec = spec_from_file_location({MODULE_NAME!r}, os.path.join(package.submodule_search_locations[0], "_bootstrap.py"))
        module = module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        module.install()
    except Exception as error:
        sys.modules[{MODULE_NAME!r}] = None
        sys.stderr.write(f"cache_crop_fix: {ENV_VAR} is set, but the start-up hook failed ({{error!r}}); transformers stays stock\\n")
"""
# One line (`site` executes lines that start with `import`); the environment is checked before anything else runs.
PTH_LINE = f"import os; os.environ.get({ENV_VAR!r}) and exec({_PTH_CODE!r}, {{}})\n"

# What happened in this process: "off", "waiting" (hook installed), "activated" or "failed: <reason>"
state = "off"
_warned = False


def requested(environ=None) -> bool:
    """Whether the environment asks for the fix (`CACHE_CROP_FIX=1`, also `true`, `yes`, `on`)."""
    value = (os.environ if environ is None else environ).get(ENV_VAR, "")
    return value.strip().lower() in TRUE_VALUES


def install() -> None:
    """Called by the `.pth` at start-up: arrange for the fix if the environment asks for it. Never raises."""
    global state
    try:
        value = os.environ.get(ENV_VAR, "")
        if not requested():
            if value.strip().lower() not in FALSE_VALUES:
                _warn(f"{ENV_VAR}={value!r} is not understood (use {ENV_VAR}=1); the fix stays off")
            return
        if _TRIGGER in sys.modules:
            _activate()
        else:
            _hook.install()
            state = "waiting"
    except Exception as error:
        _fail(error)


def _activate() -> None:
    global state
    _hook.uninstall()
    state = "activated"
    if _PACKAGE in sys.modules:
        return  # imported explicitly (maybe being imported right now): it applies the fix, or was reverted on purpose
    try:
        __import__(_PACKAGE)  # applies the fix; outside transformers 5.14.x it warns and leaves transformers stock
    except Exception as error:
        _fail(error)


def _fail(error: Exception) -> None:
    global state
    state = f"failed: {error!r}"
    try:
        _hook.uninstall()
    except Exception:
        pass
    _warn(f"{ENV_VAR} is set, but the fix could not be applied ({error!r}); transformers stays stock")


def _warn(message: str) -> None:
    global _warned
    if _warned:
        return
    _warned = True
    try:
        sys.stderr.write(f"cache_crop_fix: {message}\n")
    except Exception:
        pass


class _Hook:
    """`sys.meta_path` finder: wraps the loaders of transformers modules to know when their imports return."""

    def __init__(self) -> None:
        self._lock = _thread.RLock()
        self._executing = 0  # transformers modules whose code is running, in all threads
        self._trigger_done = False
        self._finding = _thread._local()  # `threading` is not loaded at start-up: use its C core

    def install(self) -> None:
        if self not in sys.meta_path:
            sys.meta_path.insert(0, self)

    def uninstall(self) -> None:
        while self in sys.meta_path:
            sys.meta_path.remove(self)

    def find_spec(self, fullname, path=None, target=None):
        if fullname != _UPSTREAM and not fullname.startswith(_UPSTREAM + "."):
            return None
        if getattr(self._finding, "active", False):
            return None
        self._finding.active = True
        try:
            spec = self._find_with_other_finders(fullname, path, target)
            if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
                return None
            spec.loader = _Loader(spec.loader, spec, self)
            return spec
        except Exception:
            return None  # let the import system do its usual search (and raise its usual errors)
        finally:
            self._finding.active = False

    def _find_with_other_finders(self, fullname, path, target):
        for finder in list(sys.meta_path):
            if finder is self:
                continue
            find_spec = getattr(finder, "find_spec", None)
            if find_spec is None:
                continue
            spec = find_spec(fullname, path, target)
            if spec is not None:
                return spec
        return None

    def _enter(self) -> None:
        with self._lock:
            self._executing += 1

    def _exit(self, name: str, succeeded: bool) -> bool:
        """Returns whether the fix should be applied now."""
        with self._lock:
            self._executing -= 1
            if name == _TRIGGER and succeeded:
                self._trigger_done = True
            return self._trigger_done and self._executing == 0 and self in sys.meta_path


class _Loader:
    """Runs the real loader, puts it back on the module, and applies the fix once `cache_utils` is usable."""

    def __init__(self, loader, spec, hook: _Hook) -> None:
        self._loader = loader
        self._spec = spec
        self._hook = hook

    def __getattr__(self, attribute):
        # `get_source`, `get_resource_reader`, `is_package`, ... of the real loader
        return getattr(self._loader, attribute)

    def create_module(self, spec):
        create_module = getattr(self._loader, "create_module", None)
        return None if create_module is None else create_module(spec)

    def exec_module(self, module) -> None:
        self._restore(module)
        self._hook._enter()
        succeeded = False
        try:
            self._loader.exec_module(module)
            succeeded = True
        finally:
            apply_now = self._hook._exit(self._spec.name, succeeded)
            self._restore(sys.modules.get(self._spec.name))
            if apply_now:  # also when this import failed: `cache_utils` is there and may be used (never raises)
                _activate()

    def _restore(self, module) -> None:
        # The module keeps the real loader: nothing outside this import sees the wrapper
        self._spec.loader = self._loader
        if module is not None and getattr(module, "__loader__", None) is self:
            try:
                module.__loader__ = self._loader
            except Exception:
                pass


_hook = _Hook()
