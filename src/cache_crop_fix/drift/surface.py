"""What a release exposes to `crop`, read from its wheel: the cache layer classes (in `cache_utils.py` and the models'
`modeling_*.py`) and the call sites of `crop`, `activate_past_recording` and `is_croppable` in `generation/` and
`models/`. Two releases are compared by name and code, not by line number."""

from __future__ import annotations

import ast
from collections import Counter
from dataclasses import dataclass

from .release import Release


CACHE_UTILS = "transformers/cache_utils.py"
LAYER_ROOTS = frozenset({"CacheLayerMixin"})  # every cache layer derives from it
CALLED = frozenset({"crop", "activate_past_recording"})
READ = frozenset({"is_croppable"})
# Cheap text filters: a file that mentions none of these has nothing to find
_CLASS_HINTS = ("Layer", "def crop")
_CALL_HINTS = ("crop", "activate_past_recording", "is_croppable")


@dataclass(frozen=True, order=True)
class LayerClass:
    path: str  # transformers/cache_utils.py
    name: str
    bases: tuple[str, ...]
    defines_crop: bool

    def __str__(self) -> str:
        return f"{self.path.removeprefix('transformers/')}: {self.name}({', '.join(self.bases)})" + (
            ", defines crop" if self.defines_crop else ""
        )


@dataclass(frozen=True, order=True)
class CallSite:
    path: str
    scope: str  # the enclosing class and function, e.g. `GenerationMixin._assisted_decoding`
    code: str  # the call or attribute, normalized (`ast.unparse`)
    line: int  # in its release, for people only: not part of the comparison

    @property
    def key(self) -> tuple[str, str, str]:
        return self.path, self.scope, self.code

    def __str__(self) -> str:
        return f"{self.path.removeprefix('transformers/')}:{self.line} in {self.scope or '<module>'}: {self.code}"


def _model_files(release: Release) -> list[str]:
    return [path for path in release.paths("transformers/models/") if path.rsplit("/", 1)[-1].startswith("modeling_")]


def _parse(release: Release, path: str, hints: tuple[str, ...]) -> ast.Module | None:
    source = release.read(path)
    if source is None or not any(hint in source for hint in hints):
        return None
    try:
        return ast.parse(source)
    except SyntaxError:
        return None


def _base_name(node: ast.expr) -> str:
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Subscript):  # Generic[...]
        return _base_name(node.value)
    return ast.unparse(node)


def layer_classes(release: Release) -> list[LayerClass]:
    """The classes that derive from a cache layer (by base class name, across files) or define `crop`."""
    classes = []
    for path in [CACHE_UTILS, *_model_files(release)]:
        tree = _parse(release, path, _CLASS_HINTS)
        if tree is None:
            continue
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                defines_crop = any(
                    isinstance(member, (ast.FunctionDef, ast.AsyncFunctionDef)) and member.name == "crop"
                    for member in node.body
                )
                classes.append(LayerClass(path, node.name, tuple(_base_name(b) for b in node.bases), defines_crop))
    layers = set(LAYER_ROOTS)
    changed = True
    while changed:  # the subclasses of subclasses, wherever they are defined
        changed = False
        for cls in classes:
            if cls.name not in layers and any(base in layers for base in cls.bases):
                layers.add(cls.name)
                changed = True
    return sorted(cls for cls in classes if cls.name in layers or cls.defines_crop)


class _CallFinder(ast.NodeVisitor):
    def __init__(self, path: str) -> None:
        self.path, self.scope, self.found = path, [], []

    def _visit_scope(self, node) -> None:
        self.scope.append(node.name)
        self.generic_visit(node)
        self.scope.pop()

    visit_ClassDef = visit_FunctionDef = visit_AsyncFunctionDef = _visit_scope

    def visit_Call(self, node: ast.Call) -> None:
        if isinstance(node.func, ast.Attribute) and node.func.attr in CALLED:
            self._add(node)
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr in READ:
            self._add(node)
        self.generic_visit(node)

    def _add(self, node: ast.expr) -> None:
        code = " ".join(ast.unparse(node).split())
        self.found.append(CallSite(self.path, ".".join(self.scope), code, node.lineno))


def call_sites(release: Release) -> list[CallSite]:
    """Every `.crop(...)`, `.activate_past_recording(...)` and `.is_croppable` in `generation/` and the models."""
    paths = release.paths("transformers/generation/") + _model_files(release)
    found = []
    for path in paths:
        tree = _parse(release, path, _CALL_HINTS)
        if tree is not None:
            finder = _CallFinder(path)
            finder.visit(tree)
            found += finder.found
    return sorted(found)


def new_layer_classes(old: list[LayerClass], new: list[LayerClass]) -> list[LayerClass]:
    """The classes of `new` that `old` has not (by file and name), or that define `crop` now."""
    before = {(cls.path, cls.name): cls for cls in old}
    return [
        cls
        for cls in new
        if (cls.path, cls.name) not in before or (cls.defines_crop and not before[cls.path, cls.name].defines_crop)
    ]


def new_call_sites(old: list[CallSite], new: list[CallSite]) -> list[CallSite]:
    """The call sites of `new` beyond those of `old` (same file, scope and code; counted, so a second identical call
    in the same function is new too)."""
    remaining = Counter(site.key for site in old)
    found = []
    for site in new:
        if remaining[site.key] > 0:
            remaining[site.key] -= 1
        else:
            found.append(site)
    return found
