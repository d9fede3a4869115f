"""What a release exposes to `crop`, read from its wheel: the cache layer classes (in `cache_utils.py` and the models'
`modeling_*.py`) and the call sites of `crop`, `activate_past_recording` and `is_croppable` in `generation/` and
`models/`. Two releases are compared by name and code, not by line number."""

from __future__ import annotations

import ast
import re
from collections import Counter
from dataclasses import dataclass

from .release import Release


CACHE_UTILS = "transformers/cache_utils.py"
LAYER_ROOTS = frozenset({"CacheLayerMixin"})  # every cache layer derives from it
CALLED = frozenset({"crop", "activate_past_recording"})
READ = frozenset({"is_croppable"})
# Cheap text filters, so that only the few files with something to find are parsed
_CLASS_HEAD = re.compile(r"^class (\w+)\(([^)]*)\)", re.MULTILINE)
_DEFINES_CROP = re.compile(r"^\s+def crop\(", re.MULTILINE)
_CALL_HINT = re.compile(r"\.(?:crop|activate_past_recording)\(|\.is_croppable\b")


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


def _parse(source: str) -> ast.Module | None:
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


def _layer_classes(path: str, tree: ast.Module) -> list[LayerClass]:
    classes = []
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            defines_crop = any(
                isinstance(member, (ast.FunctionDef, ast.AsyncFunctionDef)) and member.name == "crop"
                for member in node.body
            )
            classes.append(LayerClass(path, node.name, tuple(_base_name(b) for b in node.bases), defines_crop))
    return classes


def _only_layers(classes: list[LayerClass]) -> list[LayerClass]:
    """The classes that derive from a cache layer (by base class name, across files) or define `crop`."""
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


@dataclass(frozen=True)
class Surface:
    layers: list[LayerClass]  # the cache layer classes
    calls: list[CallSite]  # the call sites in generation/ and the models


def _layer_names(heads: dict[str, list[tuple[str, str]]]) -> set[str]:
    """The names of the classes that derive from a cache layer, from the class heads (name, bases text) of each file."""
    layers = set(LAYER_ROOTS)
    changed = True
    while changed:  # the subclasses of subclasses, wherever they are defined
        changed = False
        for found in heads.values():
            for name, bases in found:
                if name not in layers and set(re.findall(r"\w+", bases)) & layers:
                    layers.add(name)
                    changed = True
    return layers


def surface(release: Release) -> Surface:
    """The cache layer classes (in `cache_utils.py` and the models) and the call sites (in `generation/` and the
    models) of `release`. Only the files whose text may hold one are parsed."""
    models = _model_files(release)
    sources = {
        path: release.read(path) or "" for path in [CACHE_UTILS, *release.paths("transformers/generation/"), *models]
    }
    heads = {path: _CLASS_HEAD.findall(sources[path]) for path in [CACHE_UTILS, *models]}
    layer_names = _layer_names(heads)
    classes, calls = [], []
    for path, source in sources.items():
        is_layer_file = path in heads and (
            _DEFINES_CROP.search(source) or any(name in layer_names for name, _ in heads[path])
        )
        is_call_file = path != CACHE_UTILS and _CALL_HINT.search(source)
        tree = _parse(source) if is_layer_file or is_call_file else None
        if tree is None:
            continue
        if is_layer_file:
            classes += _layer_classes(path, tree)
        if is_call_file:
            finder = _CallFinder(path)
            finder.visit(tree)
            calls += finder.found
    return Surface(_only_layers(classes), sorted(calls))


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
