"""Installs the overlay's methods on the installed transformers classes at runtime, and takes them off again.

Every module `cache_crop_fix.overlay.X` mirrors `transformers.X`. Its classes are named like the upstream classes they
change and hold only the methods we add or replace; its module-level functions are helpers added to `transformers.X`.
Each function is re-created with the upstream module's globals (so it reads upstream names exactly as it will inside
upstream's file) and, for methods, with its `__class__` cell pointing at the upstream class (so zero-argument
`super()` works there).
"""

from __future__ import annotations

import dis
import hashlib
import importlib
import inspect
import pkgutil
import textwrap
import threading
import types
from collections.abc import Iterator
from dataclasses import dataclass

from packaging.version import Version

from . import overlay
from .fingerprints import UPSTREAM_FINGERPRINTS


SUPPORTED_RANGE = ">=5.14.0,<5.15"
_MIN_VERSION, _MAX_VERSION = Version("5.14.0"), Version("5.15.0.dev0")
_UPSTREAM_PACKAGE = "transformers"
# Attributes that every class body defines: not ours to install
_CLASS_BOOKKEEPING = {"__module__", "__qualname__", "__doc__", "__dict__", "__weakref__", "__firstlineno__"}


class UnsupportedTransformersError(RuntimeError):
    """The installed transformers is not a release this fix was written for; nothing was patched."""


class _Missing:
    def __repr__(self) -> str:
        return "<missing>"


MISSING = _Missing()


@dataclass(frozen=True)
class Patch:
    """One attribute that `apply()` sets on an upstream class or module."""

    owner: type | types.ModuleType
    name: str
    replacement: object
    original: object  # `MISSING` when the attribute is added

    @property
    def qualname(self) -> str:
        if isinstance(self.owner, types.ModuleType):
            return f"{self.owner.__name__}.{self.name}"
        return f"{self.owner.__module__}.{self.owner.__qualname__}.{self.name}"

    @property
    def is_addition(self) -> bool:
        return self.original is MISSING


@dataclass(frozen=True)
class Status:
    active: bool
    transformers_version: str
    supported: bool
    patches: tuple[str, ...]


_lock = threading.RLock()
_patches: tuple[Patch, ...] | None = None  # built once: the originals are recorded from the pristine classes
_active = False


def apply() -> None:
    """Install the fix. Idempotent; raises `UnsupportedTransformersError` (changing nothing) outside 5.14.x."""
    global _active
    with _lock:
        if _active:
            return
        patches = _get_patches()
        installed: list[Patch] = []
        try:
            for patch in patches:
                _set(patch.owner, patch.name, patch.replacement)
                installed.append(patch)
        except BaseException:
            for patch in reversed(installed):
                _restore(patch)
            raise
        _active = True


def revert() -> None:
    """Restore every original attribute exactly, and delete those the fix added. Idempotent."""
    global _active
    with _lock:
        if not _active:
            return
        for patch in reversed(_patches or ()):
            _restore(patch)
        _active = False


def is_active() -> bool:
    return _active


def status() -> Status:
    import transformers

    version = transformers.__version__
    return Status(
        active=_active,
        transformers_version=version,
        supported=is_supported_version(version),
        patches=tuple(patch.qualname for patch in _patches or ()),
    )


def is_supported_version(version: str) -> bool:
    return _MIN_VERSION <= Version(version) < _MAX_VERSION


def source_fingerprint(obj: object) -> str:
    """A short hash of a function's source, independent of its indentation."""
    function = _unwrap(obj)
    source = textwrap.dedent(inspect.getsource(function))
    return hashlib.sha256(source.encode()).hexdigest()[:16]


def installed_fingerprints() -> dict[str, str]:
    """The fingerprints of the installed upstream methods that the overlay replaces (to update `fingerprints.py`)."""
    patches = _patches if _patches is not None else tuple(_plan())
    return {
        patch.qualname: source_fingerprint(patch.original)
        for patch in patches
        if isinstance(patch.owner, type) and not patch.is_addition
    }


def _get_patches() -> tuple[Patch, ...]:
    global _patches
    if _patches is None:
        _check_version()
        patches = tuple(_plan())
        _check_fingerprints(patches)
        _patches = patches
    return _patches


def _check_version() -> None:
    import transformers

    if not is_supported_version(transformers.__version__):
        raise UnsupportedTransformersError(
            f"cache_crop_fix supports transformers{SUPPORTED_RANGE}, but transformers {transformers.__version__} is "
            "installed; nothing was patched. transformers 5.15+ has its own `crop(tokens_to_remove)` semantics: "
            "uninstall cache_crop_fix there."
        )


def _check_fingerprints(patches: tuple[Patch, ...]) -> None:
    problems = []
    for patch in patches:
        if isinstance(patch.owner, types.ModuleType) and patch.original is not MISSING:
            problems.append(f"{patch.qualname} already exists upstream")
        elif isinstance(patch.owner, type) and patch.is_addition:
            if patch.qualname in UPSTREAM_FINGERPRINTS:
                problems.append(f"{patch.qualname} is expected upstream but missing")
        elif isinstance(patch.owner, type):
            expected = UPSTREAM_FINGERPRINTS.get(patch.qualname)
            if expected is None:
                problems.append(f"{patch.qualname} has no recorded fingerprint")
            elif source_fingerprint(patch.original) not in expected:
                problems.append(f"{patch.qualname} differs from the upstream source the fix was written for")
    if problems:
        raise UnsupportedTransformersError(
            "The installed transformers does not match the code this fix replaces; nothing was patched:\n  "
            + "\n  ".join(problems)
        )


def _iter_overlay_modules() -> Iterator[tuple[types.ModuleType, types.ModuleType]]:
    """Yields (overlay module, upstream module) pairs, importing both."""
    prefix = overlay.__name__ + "."
    for info in pkgutil.walk_packages(overlay.__path__, prefix):
        if info.ispkg:
            continue
        ours = importlib.import_module(info.name)
        upstream = importlib.import_module(_UPSTREAM_PACKAGE + "." + info.name[len(prefix) :])
        yield ours, upstream


def _plan() -> Iterator[Patch]:
    for ours, upstream in _iter_overlay_modules():
        helpers = [value for value in vars(ours).values() if _is_own_function(value, ours)]
        classes = [
            value for value in vars(ours).values() if isinstance(value, type) and value.__module__ == ours.__name__
        ]
        functions = list(helpers)
        for helper in helpers:
            yield Patch(
                upstream,
                helper.__name__,
                _rebind(helper, upstream, None),
                vars(upstream).get(helper.__name__, MISSING),
            )
        for cls in classes:
            target = getattr(upstream, cls.__name__, None)
            if not isinstance(target, type):
                raise UnsupportedTransformersError(f"{upstream.__name__}.{cls.__name__} is not a class upstream.")
            for name, value in vars(cls).items():
                if name in _CLASS_BOOKKEEPING:
                    continue
                functions.append(_unwrap(value))
                yield Patch(target, name, _rebind(value, upstream, target), vars(target).get(name, MISSING))
        yield from _plan_globals(functions, ours, upstream)


def _plan_globals(
    functions: list[types.FunctionType], ours: types.ModuleType, upstream: types.ModuleType
) -> Iterator[Patch]:
    """Adds the names our functions read that the upstream module lacks (e.g. `import warnings`), or refuses."""
    needed = set()
    for function in functions:
        needed |= _global_names(function.__code__)
    builtins = vars(__builtins__) if isinstance(__builtins__, types.ModuleType) else __builtins__
    helper_names = {
        function.__name__
        for function in functions
        if function.__module__ == ours.__name__ and "." not in function.__qualname__
    }
    for name in sorted(needed - helper_names):
        if name in vars(upstream) or name in builtins:
            continue
        if name in vars(ours) and isinstance(vars(ours)[name], types.ModuleType):
            yield Patch(upstream, name, vars(ours)[name], MISSING)
            continue
        raise UnsupportedTransformersError(
            f"The overlay {ours.__name__} uses `{name}`, which {upstream.__name__} does not define."
        )


def _global_names(code: types.CodeType) -> set[str]:
    names = {ins.argval for ins in dis.get_instructions(code) if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME")}
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _global_names(const)
    return names


def _is_own_function(value: object, module: types.ModuleType) -> bool:
    return isinstance(value, types.FunctionType) and value.__module__ == module.__name__


def _unwrap(value: object) -> types.FunctionType:
    if isinstance(value, (staticmethod, classmethod)):
        return value.__func__
    if isinstance(value, property):
        return value.fget
    if isinstance(value, types.FunctionType):
        return value
    raise TypeError(f"The overlay can only hold functions, static/class methods and properties, got {value!r}.")


def _rebind(value: object, module: types.ModuleType, owner: type | None) -> object:
    """Re-creates `value` as if it had been defined in `module` (inside class `owner`, if given)."""
    if isinstance(value, staticmethod):
        return staticmethod(_rebind(value.__func__, module, owner))
    if isinstance(value, classmethod):
        return classmethod(_rebind(value.__func__, module, owner))
    if isinstance(value, property):
        parts = (value.fget, value.fset, value.fdel)
        return property(*(part and _rebind(part, module, owner) for part in parts), value.__doc__)
    function = _unwrap(value)
    closure = function.__closure__
    if closure is not None:
        # Zero-argument `super()` reads the `__class__` cell: make it the upstream class
        closure = tuple(
            types.CellType(owner) if name == "__class__" else cell
            for name, cell in zip(function.__code__.co_freevars, closure)
        )
    new = types.FunctionType(function.__code__, vars(module), function.__name__, function.__defaults__, closure)
    new.__kwdefaults__ = function.__kwdefaults__
    new.__doc__ = function.__doc__
    new.__annotations__ = dict(function.__annotations__)
    new.__module__ = module.__name__
    new.__qualname__ = f"{owner.__qualname__}.{function.__name__}" if owner is not None else function.__name__
    return new


def _set(owner: type | types.ModuleType, name: str, value: object) -> None:
    if isinstance(owner, types.ModuleType):
        vars(owner)[name] = value
    else:
        setattr(owner, name, value)


def _restore(patch: Patch) -> None:
    if patch.original is MISSING:
        if isinstance(patch.owner, types.ModuleType):
            vars(patch.owner).pop(patch.name, None)
        elif patch.name in vars(patch.owner):
            delattr(patch.owner, patch.name)
    else:
        _set(patch.owner, patch.name, patch.original)
