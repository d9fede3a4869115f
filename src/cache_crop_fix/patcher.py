"""Installs the overlay's methods on the installed transformers classes at runtime, and takes them off again.

The installed transformers release picks the target (`cache_crop_fix.targets`), and every step of that target is
installed, in order. With `CACHE_CROP_FIX_SERIES=upstream` in the environment, only the target's upstream steps are
(the pull requests of the series, without the fork steps): for checking what the series alone does, never for use. In a step package, every module `X` mirrors `transformers.X`: its classes are named like the
upstream classes they change and hold only the methods the step adds or replaces, and its module-level functions are
helpers added to `transformers.X`. When several steps define the same method, the last one's version is installed.
Each function is re-created with the upstream module's globals (so it reads upstream names exactly as it will inside
upstream's file) and, for methods, with its `__class__` cell pointing at the upstream class (so zero-argument
`super()` works there).
"""

from __future__ import annotations

import ast
import dis
import functools
import hashlib
import importlib
import importlib.abc
import importlib.util
import inspect
import linecache
import os
import pkgutil
import sys
import textwrap
import threading
import types
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, replace

from .codemod import CODEMODS_NAME, CodemodError, rewrite_statement, statement_changes
from .targets import Target, supported_ranges, target_for


_UPSTREAM_PACKAGE = "transformers"
# Attributes that every class body defines: not ours to install
_CLASS_BOOKKEEPING = {
    "__module__",
    "__qualname__",
    "__doc__",
    "__dict__",
    "__weakref__",
    "__firstlineno__",  # Python 3.13+
    "__static_attributes__",  # Python 3.13+
}


class UnsupportedTransformersError(RuntimeError):
    """The installed transformers is not a release this fix was written for; nothing was patched."""


class _Missing:
    def __repr__(self) -> str:
        return "<missing>"


MISSING = _Missing()


@dataclass(frozen=True)
class Patch:
    """One attribute that `apply()` sets on an upstream class or module (or the code of a module function)."""

    owner: type | types.ModuleType | types.FunctionType
    name: str
    replacement: object
    original: object  # `MISSING` when the attribute is added

    @property
    def qualname(self) -> str:
        if isinstance(self.owner, types.ModuleType):
            return f"{self.owner.__name__}.{self.name}"
        if isinstance(self.owner, types.FunctionType):  # its `__code__`
            return f"{self.owner.__module__}.{self.owner.__qualname__}"
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
    pending_modules: tuple[str, ...] = ()  # patched when transformers imports them
    target: str | None = None  # the target matching the installed transformers, e.g. "v5_14"


_lock = threading.RLock()
# One plan per upstream module, built once: the originals are recorded from the pristine classes, never re-stashed
# Set to `upstream`: install the target's upstream steps only (the pull requests of the series, for testing them alone)
SERIES_VAR = "CACHE_CROP_FIX_SERIES"

_plans: dict[str, tuple[Patch, ...]] = {}
_installed: list[str] = []  # upstream modules patched, in order
_active = False
_target: Target | None = None  # the target of the installed transformers, set by the first `apply()`


def apply() -> None:
    """
    Install the fix: every step of the target that matches the installed transformers. Idempotent. For a release no
    target supports, or if a replaced method differs from the source the fix was written for, raises
    `UnsupportedTransformersError` and changes nothing.

    Model modules (`models/...` in a step) are patched when transformers imports them, so that applying the fix does not
    import every model it touches.
    """
    global _active
    with _lock:
        if _active:
            return
        _check_version()
        eager = [name for name in _overlay_modules() if _is_eager(name)]
        plans = {name: _get_plan(name) for name in eager}
        installed = []
        try:
            for name, plan in plans.items():
                _install(plan)
                installed.append(name)
        except BaseException:
            for name in reversed(installed):
                _uninstall(_plans[name])
            raise
        _installed[:] = installed
        _active = True
        for name in _overlay_modules():
            if name not in plans and _upstream_name(name) in sys.modules:
                _patch_model_module(name)
        _post_import_hook.install()


def revert() -> None:
    """Restore every original attribute exactly, and delete those the fix added. Idempotent."""
    global _active
    with _lock:
        if not _active:
            return
        _post_import_hook.uninstall()
        for name in reversed(_installed):
            _uninstall(_plans[name])
        _installed.clear()
        _active = False


def is_active() -> bool:
    return _active


def status() -> Status:
    import transformers

    version = transformers.__version__
    target = target_for(version)
    patches = [patch for name in _installed for patch in _plans[name]]
    return Status(
        active=_active,
        transformers_version=version,
        supported=target is not None,
        patches=tuple(patch.qualname for patch in patches),
        pending_modules=tuple(_upstream_name(name) for name in _overlay_modules() if name not in _installed)
        if _active
        else (),
        target=target.name if target is not None else None,
    )


def is_supported_version(version: str) -> bool:
    return target_for(version) is not None


def source_fingerprint(obj: object) -> str:
    """A short hash of a function's (or code object's) source, independent of its indentation."""
    function = obj if isinstance(obj, types.CodeType) else _unwrap(obj)
    source = textwrap.dedent(inspect.getsource(function))
    return hashlib.sha256(source.encode()).hexdigest()[:16]


def replacements() -> tuple[Patch, ...]:
    """The patches that replace an upstream method or function (or a function's code), with the originals; imports every
    upstream module the target changes."""
    found = []
    for name in _overlay_modules():
        # Import first: if the fix is active, the import hook records the pristine originals in `_plans`
        importlib.import_module(_upstream_name(name))
        patches = _plans.get(name) or tuple(_plan(name))
        found.extend(
            patch for patch in patches if isinstance(patch.owner, (type, types.FunctionType)) and not patch.is_addition
        )
    return tuple(found)


def installed_fingerprints() -> dict[str, str]:
    """The fingerprints of the installed upstream methods that the overlay replaces (to update `targets/<target>.py`)."""
    return {patch.qualname: source_fingerprint(patch.original) for patch in replacements()}


def _check_version() -> Target:
    """The target of the installed transformers (the same for the whole process), or raises."""
    global _target
    if _target is not None:
        return _target
    import transformers

    target = target_for(transformers.__version__)
    if target is None:
        raise UnsupportedTransformersError(
            f"cache_crop_fix supports transformers {supported_ranges()}, but transformers {transformers.__version__} "
            "is installed; nothing was patched."
        )
    series = os.environ.get(SERIES_VAR, "")
    if series not in ("", "upstream"):
        raise ValueError(f"{SERIES_VAR} must be unset or `upstream`, not {series!r}")
    if series:
        target = replace(target, steps=target.upstream_steps)
    _target = target
    return target


def _get_plan(name: str) -> tuple[Patch, ...]:
    if name not in _plans:
        plan = tuple(_plan(name))
        _check_fingerprints(plan)
        _plans[name] = plan
    return _plans[name]


def _install(plan: tuple[Patch, ...]) -> None:
    done: list[Patch] = []
    try:
        for patch in plan:
            _set(patch.owner, patch.name, patch.replacement)
            done.append(patch)
    except BaseException:
        _uninstall(tuple(done))
        raise


def _uninstall(plan: tuple[Patch, ...]) -> None:
    for patch in reversed(plan):
        _restore(patch)


def _check_fingerprints(patches: tuple[Patch, ...]) -> None:
    problems = []
    for patch in patches:
        if isinstance(patch.owner, types.ModuleType) and patch.original is not MISSING:
            problems.append(f"{patch.qualname} already exists upstream")
        elif isinstance(patch.owner, type) and patch.is_addition:
            if patch.qualname in _check_version().fingerprints:
                problems.append(f"{patch.qualname} is expected upstream but missing")
        elif isinstance(patch.owner, (type, types.FunctionType)):
            expected = _check_version().fingerprints.get(patch.qualname)
            if expected is None:
                problems.append(f"{patch.qualname} has no recorded fingerprint")
            elif source_fingerprint(patch.original) not in expected:
                problems.append(f"{patch.qualname} differs from the upstream source the fix was written for")
    if problems:
        raise UnsupportedTransformersError(
            "The installed transformers does not match the code this fix replaces; nothing was patched:\n  "
            + "\n  ".join(problems)
        )


def _overlay_modules() -> tuple[str, ...]:
    """The upstream modules the target changes, relative to `transformers`: e.g. `cache_utils`, `models.pi0.modeling_pi0`."""
    return tuple(_step_modules(_check_version()))


@functools.cache
def _step_modules(target: Target) -> dict[str, tuple[str, ...]]:
    """Maps each module the target changes (relative to `transformers`) to its overlay modules, in step order."""
    modules: dict[str, list[str]] = {}
    for package_name in target.step_packages():
        package = importlib.import_module(package_name)
        prefix = package_name + "."
        for info in pkgutil.walk_packages(package.__path__, prefix):
            if not info.ispkg:
                modules.setdefault(info.name[len(prefix) :], []).append(info.name)
    return {name: tuple(overlays) for name, overlays in modules.items()}


def _upstream_name(name: str) -> str:
    return f"{_UPSTREAM_PACKAGE}.{name}"


def _is_eager(name: str) -> bool:
    # Model modules are heavy to import: they are patched when transformers imports them
    return not name.startswith("models.")


def _plan(name: str) -> Iterator[Patch]:
    upstream = importlib.import_module(_upstream_name(name))
    steps = [importlib.import_module(overlay) for overlay in _step_modules(_check_version())[name]]
    # What the steps define, the last definition of each name winning: (class name or None, attribute) -> value
    members: dict[tuple[str | None, str], object] = {}
    for ours in steps:
        # Statement changes of upstream methods, chained in step order (see `cache_crop_fix.codemod`)
        for label, codemod in vars(ours).get(CODEMODS_NAME, {}).items():
            class_name, _, attribute = label.rpartition(".")
            for old, new in statement_changes(codemod):
                earlier = members.get((class_name or None, attribute))
                earlier = earlier if isinstance(earlier, _Codemod) else None
                members[class_name or None, attribute] = _Codemod(label, old, new, earlier)
        for value in vars(ours).values():
            if _is_own_function(value, ours):
                members[None, value.__name__] = value
            elif isinstance(value, type) and value.__module__ == ours.__name__:
                for attribute, member in vars(value).items():
                    if attribute not in _CLASS_BOOKKEEPING:
                        members[value.__name__, attribute] = member
    helper_names = {attribute for owner_name, attribute in members if owner_name is None}
    functions = []
    for (owner_name, attribute), value in members.items():
        if isinstance(value, _Codemod) and owner_name is None:
            yield value.patch_function(upstream)
            continue
        if isinstance(value, _Codemod):
            owner = getattr(upstream, owner_name)
            original = vars(owner).get(attribute, MISSING)
            yield Patch(owner, attribute, value.apply(original, upstream, owner), original)
            continue
        functions.append(inspect.unwrap(_unwrap(value)))
        if owner_name is None:
            yield Patch(upstream, attribute, _rebind(value, upstream, None), vars(upstream).get(attribute, MISSING))
            continue
        owner = getattr(upstream, owner_name, None)
        if not isinstance(owner, type):
            raise UnsupportedTransformersError(f"{upstream.__name__}.{owner_name} is not a class upstream.")
        yield Patch(owner, attribute, _rebind(value, upstream, owner), vars(owner).get(attribute, MISSING))
    yield from _plan_globals(functions, helper_names, steps, upstream)


@dataclass(frozen=True)
class _Codemod:
    label: str  # "Class.method"
    old: str
    new: str
    earlier: _Codemod | None = None  # of the same method by an earlier step: applied first

    def rewrite(self, source: str) -> str:
        if self.earlier is not None:
            source = self.earlier.rewrite(source)
        return rewrite_statement(source, self.old, self.new, self.label)

    def apply(self, original: object, upstream: types.ModuleType, owner: type | None = None) -> object:
        """The upstream method `original` (of the class `owner`, if any) with the statement changed, defined in
        `upstream` (decorators included)."""
        if not isinstance(original, types.FunctionType):
            raise UnsupportedTransformersError(f"{upstream.__name__}.{self.label} is not a function upstream.")
        try:
            source = self.rewrite(textwrap.dedent(inspect.getsource(original)))
        except CodemodError as error:
            raise UnsupportedTransformersError(str(error)) from error
        if owner is not None:
            # A method is compiled in a class body of its class's name: zero-argument `super()` gets its `__class__`
            # cell (made the upstream class below) and private names are mangled as upstream's are
            source = f"class {owner.__name__}:\n" + textwrap.indent(source, "    ")
        # Registered like a file, so that tracebacks and `inspect.getsource` show the code that runs
        filename = f"<cache_crop_fix codemod of {upstream.__name__}.{self.label}>"
        linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
        namespace: dict[str, object] = {}
        exec(compile(source, filename, "exec"), vars(upstream), namespace)
        if owner is None:
            function = namespace[original.__name__]
        else:
            function = vars(namespace[owner.__name__])[original.__name__]
        inner = inspect.unwrap(function)
        for name, cell in zip(inner.__code__.co_freevars, inner.__closure__ or ()):
            if name == "__class__":
                cell.cell_contents = owner
        inner.__qualname__ = original.__qualname__
        return function

    def patch_function(self, upstream: types.ModuleType) -> Patch:
        """The patch of a module function: its code object is swapped (under its decorators), so that the modules that
        imported the function by name run the change too."""
        original = vars(upstream).get(self.label)
        if not isinstance(original, types.FunctionType):
            raise UnsupportedTransformersError(f"{upstream.__name__}.{self.label} is not a function upstream.")
        function = inspect.unwrap(original)
        code = inspect.unwrap(self.apply(function, upstream)).__code__
        if code.co_freevars != function.__code__.co_freevars:
            raise UnsupportedTransformersError(
                f"{upstream.__name__}.{self.label} is a closure: cannot change its code."
            )
        return Patch(function, "__code__", code, function.__code__)


def _plan_globals(
    functions: list[types.FunctionType],
    helper_names: set[str],
    steps: list[types.ModuleType],
    upstream: types.ModuleType,
) -> Iterator[Patch]:
    """
    Adds the names our functions read that the upstream module lacks (e.g. `import warnings`, or a constant such as
    a warning's message), or refuses. The helpers are left out: the plan installs them.
    """
    needed = set()
    for function in functions:
        needed |= _global_names(function.__code__)
    builtins = vars(__builtins__) if isinstance(__builtins__, types.ModuleType) else __builtins__
    for name in sorted(needed - helper_names):
        if name in vars(upstream) or name in builtins:
            continue
        imported = [vars(ours)[name] for ours in steps if name in vars(ours)]
        if imported:
            # Imported or defined by the overlay (e.g. `import warnings`, a message): the upstream module needs it too
            yield Patch(upstream, name, imported[-1], MISSING)
            continue
        raise UnsupportedTransformersError(
            f"The overlay of {upstream.__name__} uses `{name}`, which {upstream.__name__} does not define."
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
    inner = inspect.unwrap(function)
    if inner is not function:
        return _redecorate(function, _rebind(inner, module, owner), module)
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


def _redecorate(decorated: types.FunctionType, function: types.FunctionType, module: types.ModuleType) -> object:
    """Re-applies the decorators of an overlay function to its rebound version, evaluating them in `module`."""
    definition = ast.parse(textwrap.dedent(inspect.getsource(decorated))).body[0]
    for decorator in reversed(definition.decorator_list):
        function = eval(compile(ast.Expression(decorator), "<overlay decorator>", "eval"), vars(module))(function)
    return function


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


class _PostImportHook(importlib.abc.MetaPathFinder):
    """While the fix is active, patches an overlay's lazily patched module right after transformers imports it."""

    def __init__(self) -> None:
        self._finding: set[str] = set()

    def install(self) -> None:
        if self not in sys.meta_path:
            sys.meta_path.insert(0, self)

    def uninstall(self) -> None:
        if self in sys.meta_path:
            sys.meta_path.remove(self)

    def find_spec(self, fullname, path, target=None):
        prefix = _UPSTREAM_PACKAGE + "."
        name = fullname[len(prefix) :] if fullname.startswith(prefix) else None
        if name not in _overlay_modules() or name in _installed or fullname in self._finding:
            return None
        self._finding.add(fullname)
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            self._finding.discard(fullname)
        if spec is None or spec.loader is None:
            return None
        spec.loader = _PatchingLoader(spec.loader, name)
        return spec


class _PatchingLoader(importlib.abc.Loader):
    def __init__(self, loader: importlib.abc.Loader, name: str) -> None:
        self._loader = loader
        self._name = name

    def __getattr__(self, attribute: str) -> object:
        # `get_source`, `get_filename`, ... of the real loader
        return getattr(self._loader, attribute)

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module: types.ModuleType) -> None:
        self._loader.exec_module(module)
        with _lock:
            if _active and self._name not in _installed:
                _patch_model_module(self._name)


def _patch_model_module(name: str) -> None:
    """Patches a lazily patched module; if it does not match the fix, warns and leaves only that module stock."""
    try:
        _install(_get_plan(name))
    except UnsupportedTransformersError as error:
        # Failing the user's import (or the whole fix) would be worse than leaving this one model stock
        warnings.warn(f"cache_crop_fix left {_upstream_name(name)} unpatched: {error}", RuntimeWarning, stacklevel=2)
        return
    _installed.append(name)


_post_import_hook = _PostImportHook()
