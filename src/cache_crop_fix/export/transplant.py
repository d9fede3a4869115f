"""Transplants the overlay into upstream transformers source files, with libcst.

An overlay module (`cache_crop_fix/overlay/<target>/<step>/<path>.py`) mirrors `transformers/<path>.py`:

- its classes are named like the upstream classes they change and hold only methods: a method that upstream's class
  defines is replaced in place, any other one is added at the end of the class;
- its other top-level statements (functions, constants) are helpers, added to the upstream module before its first
  class or function (or replaced in place when the target already has them, so that transplanting twice changes
  nothing);
- its imports are added to the target's import block when a transplanted function needs a name the target lacks;
- its `if TYPE_CHECKING:` block and its leading comment header only exist so that the overlay lints on its own: they
  are never transplanted.

Everything else in the target keeps its exact text (comments, formatting). A transplant that would leave a name
unbound (a `NameError` at run time) is refused. `merge_test_module` merges test classes into an upstream test file.
"""

from __future__ import annotations

import ast
import builtins
import hashlib
import importlib
import inspect
import textwrap
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import libcst as cst
from libcst.metadata import BuiltinScope, GlobalScope, MetadataWrapper, ScopeProvider

from ..codemod import CODEMODS_NAME, CodemodError, rewrite_method, statement_changes


UPSTREAM_PACKAGE = "transformers"
_OVERLAY_PACKAGE = "cache_crop_fix.overlay"
# Names every module binds without an assignment
_MODULE_DUNDERS = {
    "__name__",
    "__file__",
    "__doc__",
    "__spec__",
    "__loader__",
    "__package__",
    "__builtins__",
    "__path__",
    "__annotations__",
}


class TransplantError(Exception):
    """The overlay cannot be transplanted; `problems` lists every reason found."""

    def __init__(self, problems: Sequence[str], context: str = ""):
        self.problems = list(problems)
        self.context = context
        heading = f"{context}: " if context else ""
        super().__init__(heading + "\n  ".join(["cannot transplant the overlay:", *self.problems]))


# --------------------------------------------------------------------------------------------------------------------
# Bindings: which names a module binds at run time, and where an imported name comes from


@dataclass(frozen=True)
class ImportBinding:
    """One name bound by an import statement, resolved to absolute module names."""

    name: str  # the name bound in the module
    module: str  # `import a.b` -> "a.b"; `from a.b import c` -> "a.b"
    imported: str | None  # `from a.b import c` -> "c"; `None` for `import a.b`
    asname: str | None

    @property
    def origin(self) -> str:
        """What the bound name refers to, as a dotted path (`a` for `import a.b`, `a.b.c` for `from a.b import c`)."""
        if self.imported is None:
            return self.module if self.asname else self.module.split(".")[0]
        return f"{self.module}.{self.imported}"

    def is_compatible_with(self, other: ImportBinding) -> bool:
        """Whether two imports of the same name bind the same object (re-exports inside transformers are allowed)."""
        if self.origin == other.origin:
            return True
        same_object_name = self.imported is not None and self.imported == other.imported
        return same_object_name and all(binding.module.split(".")[0] == UPSTREAM_PACKAGE for binding in (self, other))

    def statement_for(self, module_name: str | None) -> cst.SimpleStatementLine:
        """The import statement that binds this name, written relative to `module_name` inside transformers."""
        alias = cst.ImportAlias(
            name=cst.parse_expression(self.imported or self.module),
            asname=cst.AsName(name=cst.Name(self.asname)) if self.asname else None,
        )
        if self.imported is None:
            return cst.SimpleStatementLine([cst.Import(names=[alias])])
        relative = _relative_module(self.module, module_name)
        if relative is None:
            return cst.parse_statement(f"from {self.module} import {_alias_code(alias)}")
        return cst.parse_statement(f"from {relative} import {_alias_code(alias)}")


def _alias_code(alias: cst.ImportAlias) -> str:
    return cst.Module([]).code_for_node(alias.with_changes(comma=cst.MaybeSentinel.DEFAULT))


def _package_of(module_name: str, is_package: bool = False) -> list[str]:
    parts = module_name.split(".")
    return parts if is_package else parts[:-1]


def _relative_module(module: str, module_name: str | None) -> str | None:
    """`module` as upstream writes it from inside `module_name` (relative within the same package), or `None`."""
    if module_name is None or module.split(".")[0] != module_name.split(".")[0]:
        return None
    package = _package_of(module_name)
    parts = module.split(".")
    common = 0
    while common < min(len(package), len(parts)) and package[common] == parts[common]:
        common += 1
    level = len(package) - common + 1
    return "." * level + ".".join(parts[common:])


def _absolute_module(node: cst.ImportFrom, module_name: str | None) -> str:
    dotted = _dotted(node.module) if node.module is not None else ""
    level = len(node.relative)
    if level == 0:
        return dotted
    if module_name is None:
        raise TransplantError([f"relative import `{_code(node)}` cannot be resolved here"])
    package = _package_of(module_name)
    base = package[: len(package) - level + 1]
    return ".".join([*base, dotted] if dotted else base)


def _dotted(node: cst.BaseExpression) -> str:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return f"{_dotted(node.value)}.{node.attr.value}"
    raise TypeError(f"not a dotted name: {node!r}")


def _code(node: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(node).strip()


def import_bindings(statement: cst.Import | cst.ImportFrom, module_name: str | None) -> list[ImportBinding]:
    if isinstance(statement, cst.Import):
        bindings = []
        for alias in statement.names:
            dotted = _dotted(alias.name)
            asname = alias.asname.name.value if alias.asname else None
            bindings.append(ImportBinding(asname or dotted.split(".")[0], dotted, None, asname))
        return bindings
    if isinstance(statement.names, cst.ImportStar):
        return [ImportBinding("*", _absolute_module(statement, module_name), "*", None)]
    module = _absolute_module(statement, module_name)
    bindings = []
    for alias in statement.names:
        imported = _dotted(alias.name)
        asname = alias.asname.name.value if alias.asname else None
        bindings.append(ImportBinding(asname or imported, module, imported, asname))
    return bindings


def is_type_checking_block(statement: cst.CSTNode) -> bool:
    if not isinstance(statement, cst.If):
        return False
    test = statement.test
    return (isinstance(test, cst.Name) and test.value == "TYPE_CHECKING") or (
        isinstance(test, cst.Attribute) and test.attr.value == "TYPE_CHECKING"
    )


def _target_names(target: cst.BaseExpression) -> list[str]:
    if isinstance(target, cst.Name):
        return [target.value]
    if isinstance(target, (cst.Tuple, cst.List)):
        return [name for element in target.elements for name in _target_names(element.value)]
    if isinstance(target, cst.StarredElement):
        return _target_names(target.value)
    return []  # attributes and subscripts bind no name


def statement_names(statement: cst.CSTNode) -> list[str]:
    """The names a top-level simple or compound statement binds directly (not inside its nested blocks)."""
    if isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
        return [statement.name.value]
    names = []
    if isinstance(statement, cst.SimpleStatementLine):
        for small in statement.body:
            if isinstance(small, cst.Assign):
                for target in small.targets:
                    names += _target_names(target.target)
            elif isinstance(small, (cst.AugAssign,)) or (isinstance(small, cst.AnnAssign) and small.value is not None):
                names += _target_names(small.target)
    return names


@dataclass
class ModuleBindings:
    """The names a module binds at run time (an `if TYPE_CHECKING:` block binds nothing at run time)."""

    imports: dict[str, ImportBinding] = field(default_factory=dict)
    others: set[str] = field(default_factory=set)
    has_star_import: bool = False

    def __contains__(self, name: str) -> bool:
        return name in self.imports or name in self.others


def module_bindings(module: cst.Module, module_name: str | None) -> ModuleBindings:
    bindings = ModuleBindings()
    _collect_bindings(module.body, module_name, bindings)
    return bindings


def _collect_bindings(statements: Iterable[cst.CSTNode], module_name: str | None, bindings: ModuleBindings) -> None:
    for statement in statements:
        if is_type_checking_block(statement):
            if statement.orelse is not None:
                _collect_bindings([statement.orelse], module_name, bindings)
            continue
        if isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                if isinstance(small, (cst.Import, cst.ImportFrom)):
                    for binding in import_bindings(small, module_name):
                        if binding.name == "*":
                            bindings.has_star_import = True
                        else:
                            bindings.imports.setdefault(binding.name, binding)
            bindings.others.update(statement_names(statement))
            continue
        bindings.others.update(statement_names(statement))
        if isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
            continue
        if isinstance(statement, cst.For):
            bindings.others.update(_target_names(statement.target))
        if isinstance(statement, cst.With):
            for item in statement.items:
                if item.asname is not None:
                    bindings.others.update(_target_names(item.asname.name))
        for child in _nested_blocks(statement):
            _collect_bindings(child, module_name, bindings)


def _suite_statements(suite: cst.BaseSuite) -> Sequence[cst.CSTNode]:
    if isinstance(suite, cst.SimpleStatementSuite):
        return [cst.SimpleStatementLine(body=suite.body)]
    return suite.body


def _nested_blocks(statement: cst.CSTNode) -> list[Sequence[cst.CSTNode]]:
    blocks = []
    for attribute in ("body", "orelse", "finalbody"):
        value = getattr(statement, attribute, None)
        if isinstance(value, cst.SimpleStatementSuite):
            blocks.append([cst.SimpleStatementLine(body=value.body)])
        elif isinstance(value, cst.BaseSuite):
            blocks.append(value.body)
        elif isinstance(value, (cst.If, cst.Else, cst.Finally)):
            blocks.append([value] if isinstance(value, cst.If) else _suite_statements(value.body))
    for handler in getattr(statement, "handlers", ()):
        blocks.append(_suite_statements(handler.body))
    return blocks


# --------------------------------------------------------------------------------------------------------------------
# The overlay


@dataclass
class OverlayModule:
    """A parsed overlay module: what it adds to or replaces in its upstream module."""

    path: str  # relative to the overlay package, e.g. "cache_utils.py" or "models/pi0/modeling_pi0.py"
    imports: dict[str, ImportBinding]
    helpers: list[tuple[list[str], cst.BaseStatement]]
    classes: dict[str, list[cst.FunctionDef]]
    codemods: dict[str, tuple[str, str]] = field(default_factory=dict)  # "Class.method" -> (old, new): see `codemod`

    @property
    def module_name(self) -> str:
        """The dotted name of the upstream module, e.g. `transformers.models.pi0.modeling_pi0`."""
        return f"{UPSTREAM_PACKAGE}.{self.path[: -len('.py')].replace('/', '.')}"

    @property
    def target_path(self) -> str:
        return f"src/{UPSTREAM_PACKAGE}/{self.path}"

    @property
    def helper_names(self) -> list[str]:
        return [name for names, _ in self.helpers for name in names]

    def members(self) -> list[tuple[str, str]]:
        return [(class_name, method.name.value) for class_name, methods in self.classes.items() for method in methods]


def parse_overlay(source: str, path: str) -> OverlayModule:
    module = cst.parse_module(source)
    problems, imports, helpers, classes, codemods = [], {}, [], {}, {}
    for index, statement in enumerate(module.body):
        if index == 0 and _is_docstring(statement):
            continue
        if is_type_checking_block(statement):
            continue
        if isinstance(statement, cst.SimpleStatementLine) and all(
            isinstance(small, (cst.Import, cst.ImportFrom)) for small in statement.body
        ):
            for small in statement.body:
                if isinstance(small, cst.ImportFrom) and small.relative:
                    problems.append(f"relative import `{_code(small)}`: overlay imports must be absolute")
                    continue
                if isinstance(small, cst.ImportFrom) and _dotted(small.module) == "__future__":
                    continue
                if isinstance(small, cst.ImportFrom) and _dotted(small.module).startswith(f"{_OVERLAY_PACKAGE}."):
                    # A backport's step that makes the change of the main line's step: its codemods
                    if [binding.name for binding in import_bindings(small, None)] != [CODEMODS_NAME]:
                        problems.append(f"`{_code(small)}`: only `{CODEMODS_NAME}` is imported from another overlay")
                    else:
                        codemods = getattr(importlib.import_module(_dotted(small.module)), CODEMODS_NAME)
                    continue
                for binding in import_bindings(small, None):
                    if binding.name == "*":
                        problems.append(f"star import `{_code(small)}` is not supported in the overlay")
                    else:
                        imports[binding.name] = binding
            continue
        if isinstance(statement, cst.ClassDef):
            methods = []
            for member in statement.body.body:
                if isinstance(member, cst.FunctionDef):
                    methods.append(member)
                elif not (_is_docstring(member) or _is_pass(member)):
                    problems.append(
                        f"`{statement.name.value}` holds `{_code(member)[:60]}`: overlay classes may only hold methods"
                    )
            if statement.name.value in classes:
                problems.append(f"class `{statement.name.value}` is defined twice")
            classes[statement.name.value] = methods
            continue
        names = statement_names(statement)
        if names == [CODEMODS_NAME]:
            codemods = ast.literal_eval(_code(statement.body[0].value))
            continue
        if not names:
            problems.append(f"top-level statement `{_code(statement)[:60]}` binds no name: cannot transplant it")
            continue
        helpers.append((names, statement))
    if problems:
        raise TransplantError(problems, f"overlay {path}")
    return OverlayModule(path, imports, helpers, classes, codemods)


def _is_docstring(statement: cst.CSTNode) -> bool:
    return (
        isinstance(statement, cst.SimpleStatementLine)
        and len(statement.body) == 1
        and isinstance(statement.body[0], cst.Expr)
        and isinstance(statement.body[0].value, (cst.SimpleString, cst.ConcatenatedString))
    )


def _is_pass(statement: cst.CSTNode) -> bool:
    return isinstance(statement, cst.SimpleStatementLine) and all(isinstance(s, cst.Pass) for s in statement.body)


# --------------------------------------------------------------------------------------------------------------------
# Checking a base against what the overlay expects


def method_sources(source: str, module_name: str) -> dict[str, str]:
    """The source of every method of every top-level class, and of every module-level function, dedented, as
    `inspect.getsource` gives it.

    Keys are qualified names (`transformers.cache_utils.Cache.crop`, `transformers.masking_utils.create_causal_mask`).
    Like `inspect.getsource`, a method's source starts at its first decorator and ends with its block.
    """
    lines = source.splitlines(keepends=True)
    sources = {}
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            first = min([decorator.lineno for decorator in node.decorator_list] + [node.lineno])
            sources[f"{module_name}.{node.name}"] = "".join(inspect.getblock(lines[first - 1 :]))
            continue
        if not isinstance(node, ast.ClassDef):
            continue
        for member in node.body:
            if isinstance(member, (ast.FunctionDef, ast.AsyncFunctionDef)):
                first = min([decorator.lineno for decorator in member.decorator_list] + [member.lineno])
                sources[f"{module_name}.{node.name}.{member.name}"] = textwrap.dedent(
                    "".join(inspect.getblock(lines[first - 1 :]))
                )
    return sources


def text_fingerprint(method_source: str) -> str:
    """`patcher.source_fingerprint` of a method, from its dedented source text."""
    return hashlib.sha256(method_source.encode()).hexdigest()[:16]


def method_fingerprints(source: str, module_name: str) -> dict[str, str]:
    """`patcher.source_fingerprint` of every method of every top-level class, computed from the source text (keys as
    in `method_sources`)."""
    return {qualname: text_fingerprint(text) for qualname, text in method_sources(source, module_name).items()}


def check_base(
    source: str | None,
    overlay: OverlayModule,
    fingerprints: Mapping[str, Iterable[str]],
    module_name: str | None = None,
    path: str | None = None,
) -> list[str]:
    """Lists every way the base `source` differs from what the overlay expects (an empty list: it fits).

    A method with a recorded fingerprint is a replacement: it must exist with that exact source. Any other overlay
    method is an addition and must not exist yet; neither may a helper.
    """
    module_name = module_name or overlay.module_name
    path = path or overlay.target_path
    if source is None:
        return [f"{path} is missing"]
    module = cst.parse_module(source)
    classes = _top_level_classes(module)
    found = method_fingerprints(source, module_name)
    bindings = module_bindings(module, module_name)
    problems = []
    for class_name, methods in overlay.classes.items():
        if class_name not in classes:
            problems.append(f"{path}: class `{class_name}` is missing")
            continue
        defined = _method_names(classes[class_name])
        for method in methods:
            qualname = f"{module_name}.{class_name}.{method.name.value}"
            label = f"{path}: `{class_name}.{method.name.value}`"
            expected = fingerprints.get(qualname)
            if expected is not None:
                if method.name.value not in defined:
                    problems.append(f"{label} is replaced by the fix but missing from the base")
                elif found.get(qualname) not in set(expected):
                    problems.append(
                        f"{label} differs from the source the fix was written for (fingerprint "
                        f"{found.get(qualname)}, expected {' or '.join(sorted(expected))})"
                    )
            elif method.name.value in defined:
                problems.append(
                    f"{label} is added by the fix but already exists in the base (if the fix replaces it, record its "
                    "fingerprint in cache_crop_fix/targets/<target>.py)"
                )
    for label in overlay.codemods:
        qualname = f"{module_name}.{label}"
        if found.get(qualname) not in set(fingerprints.get(qualname, ())):
            problems.append(
                f"{path}: `{label}` (changed by a codemod) is missing from the base or differs from the source the fix "
                f"was written for (fingerprint {found.get(qualname)})"
            )
    for name in overlay.helper_names:
        if name in bindings:
            problems.append(f"{path}: helper `{name}` is added by the fix but the base already defines it")
    return problems


def _top_level_classes(module: cst.Module) -> dict[str, cst.ClassDef]:
    return {statement.name.value: statement for statement in module.body if isinstance(statement, cst.ClassDef)}


def _method_names(class_def: cst.ClassDef) -> set[str]:
    return {member.name.value for member in class_def.body.body if isinstance(member, cst.FunctionDef)}


# --------------------------------------------------------------------------------------------------------------------
# The transplant


@dataclass
class TransplantResult:
    source: str
    replaced: list[str] = field(default_factory=list)  # "Class.method"
    added: list[str] = field(default_factory=list)  # "Class.method"
    helpers: list[str] = field(default_factory=list)
    imports: list[str] = field(default_factory=list)  # the import statements added or extended
    # classes (and module-level functions) the target lacks (allowed for modular files)
    skipped_classes: list[str] = field(default_factory=list)

    @property
    def changed_units(self) -> set[str]:
        return {*self.replaced, *self.added, *self.helpers}


def transplant(
    target_source: str,
    overlay: OverlayModule,
    module_name: str | None = None,
    allow_missing_classes: bool = False,
) -> TransplantResult:
    """Transplants `overlay` into `target_source` (the source of upstream module `module_name`).

    Idempotent: transplanting into an already transplanted source returns it unchanged.
    """
    module_name = module_name or overlay.module_name
    module = cst.parse_module(target_source)
    result = TransplantResult(source=target_source)
    problems = []
    transplanted: dict[str, cst.CSTNode] = {}  # label -> node inserted, for the scope check

    body = list(module.body)
    class_indices = {
        statement.name.value: index for index, statement in enumerate(body) if isinstance(statement, cst.ClassDef)
    }
    for class_name, methods in overlay.classes.items():
        if class_name not in class_indices:
            if allow_missing_classes:
                result.skipped_classes.append(class_name)
            else:
                problems.append(f"class `{class_name}` is missing from the target")
            continue
        class_def = body[class_indices[class_name]]
        members = list(class_def.body.body)
        for method in methods:
            label = f"{class_name}.{method.name.value}"
            positions = [
                index
                for index, member in enumerate(members)
                if isinstance(member, cst.FunctionDef) and member.name.value == method.name.value
            ]
            if len(positions) > 1:
                problems.append(
                    f"`{label}` is defined {len(positions)} times in the target: cannot tell which to replace"
                )
                continue
            if positions:
                problem = _decorator_change(members[positions[0]], method, label)
                if problem:
                    problems.append(problem)
                    continue
                new = _with_leading_lines(method, members[positions[0]].leading_lines)
                members[positions[0]] = new
                result.replaced.append(label)
            else:
                new = method.with_changes(
                    leading_lines=[cst.EmptyLine(indent=False), *_comment_lines(method.leading_lines)]
                )
                members.append(new)
                result.added.append(label)
            transplanted[label] = new
        body[class_indices[class_name]] = class_def.with_changes(body=class_def.body.with_changes(body=members))

    insert_at = next(
        (index for index, statement in enumerate(body) if isinstance(statement, (cst.ClassDef, cst.FunctionDef))),
        len(body),
    )
    new_helpers = []
    for names, helper in overlay.helpers:
        existing = [index for index, statement in enumerate(body) if set(names) & set(statement_names(statement))]
        if len(existing) > 1 or (
            existing
            and (set(statement_names(body[existing[0]])) != set(names) or type(body[existing[0]]) is not type(helper))
        ):
            problems.append(f"helper `{', '.join(names)}` clashes with a different definition in the target")
            continue
        if existing and isinstance(helper, cst.FunctionDef):
            problem = _decorator_change(body[existing[0]], helper, ", ".join(names))
            if problem:
                problems.append(problem)
                continue
        if existing:
            new = _with_leading_lines(helper, body[existing[0]].leading_lines)
            body[existing[0]] = new
        else:
            new = helper.with_changes(
                leading_lines=[
                    cst.EmptyLine(indent=False),
                    cst.EmptyLine(indent=False),
                    *_comment_lines(helper.leading_lines),
                ]
            )
            new_helpers.append(new)
        transplanted[", ".join(names)] = new
        result.helpers.extend(names)
    body[insert_at:insert_at] = new_helpers
    if problems:
        raise TransplantError(problems, module_name)

    module = module.with_changes(body=body)
    accesses = _global_accesses(module, transplanted)
    module, result.imports = _add_needed_imports(module, accesses, overlay.imports, module_name)
    undefined = _undefined_names(module, accesses, module_name)
    if undefined:
        raise TransplantError(
            [
                f"`{label}` uses `{name}`, which {module_name} does not bind (it would raise a NameError)"
                for label, name in undefined
            ],
            module_name,
        )
    result.source = module.code
    # A modular file may import a function that a codemod changes (see below): what it defines itself
    modular_functions = (
        {node.name for node in ast.parse(result.source).body if isinstance(node, ast.FunctionDef)}
        if allow_missing_classes
        else set()
    )
    for label, codemod in overlay.codemods.items():
        class_name = label.rpartition(".")[0]
        if class_name and class_name not in class_indices:
            if allow_missing_classes:
                result.skipped_classes.append(class_name)
                continue
            raise TransplantError([f"class `{class_name}` is missing from the target"], module_name)
        if not class_name and allow_missing_classes and label not in modular_functions:
            # A modular file that imports the function from another model: its generated modeling file has the copy
            result.skipped_classes.append(label)
            continue
        rewritten = result.source
        for old, new in statement_changes(codemod):
            try:
                rewritten = rewrite_method(rewritten, label, old, new)
            except CodemodError as error:
                raise TransplantError([str(error)], module_name) from error
        if rewritten != result.source:
            result.source = rewritten
            result.replaced.append(label)
    return result


def _decorator_change(upstream: cst.FunctionDef, ours: cst.FunctionDef, label: str) -> str | None:
    """The problem with replacing `upstream` by `ours` if that drops one of upstream's decorators (accelerate hooks,
    deprecated keywords, `torch.no_grad`...: an overlay function repeats them), else None."""
    our_decorators = [_code(decorator.decorator) for decorator in ours.decorators]
    dropped = [
        code
        for code in (_code(decorator.decorator) for decorator in upstream.decorators)
        if code not in our_decorators
    ]
    if not dropped:
        return None
    return (
        f"`{label}` would drop the decorator(s) {', '.join(f'@{code}' for code in dropped)} of the upstream function"
    )


def _comment_lines(lines: Sequence[cst.EmptyLine]) -> list[cst.EmptyLine]:
    return [line for line in lines if line.comment is not None]


def _with_leading_lines(node: cst.CSTNode, target_lines: Sequence[cst.EmptyLine]) -> cst.CSTNode:
    """Keeps the target's leading blank lines and comments, unless the overlay brings comments of its own."""
    comments = _comment_lines(node.leading_lines)
    if not comments:
        return node.with_changes(leading_lines=target_lines)
    blank_prefix = []
    for line in target_lines:
        if line.comment is not None:
            break
        blank_prefix.append(line)
    return node.with_changes(leading_lines=[*blank_prefix, *comments])


def _global_accesses(module: cst.Module, roots: Mapping[str, cst.CSTNode]) -> list[tuple[str, str]]:
    """(label, name) for every name read inside `roots` that resolves to module globals or to nothing."""
    owner = {}
    for label, root in roots.items():
        for node in _walk(root):
            owner[id(node)] = label
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    scopes = {scope for scope in wrapper.resolve(ScopeProvider).values() if scope is not None}
    found = []
    for scope in scopes:
        for access in scope.accesses:
            label = owner.get(id(access.node))
            if label is None or not isinstance(access.node, cst.Name):
                continue
            referent_scopes = [referent.scope for referent in access.referents]
            if any(not isinstance(s, (GlobalScope, BuiltinScope)) for s in referent_scopes):
                continue  # a local, an argument, a closure variable
            found.append((label, access.node.value))
    return sorted(set(found))


def _walk(node: cst.CSTNode) -> Iterable[cst.CSTNode]:
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(current.children)


def _is_bound(name: str, bindings: ModuleBindings) -> bool:
    return name in bindings or hasattr(builtins, name) or name in _MODULE_DUNDERS


def _undefined_names(
    module: cst.Module, accesses: Sequence[tuple[str, str]], module_name: str | None
) -> list[tuple[str, str]]:
    """The `(label, name)` accesses (from `_global_accesses`) whose name `module` does not bind at run time."""
    bindings = module_bindings(module, module_name)
    if bindings.has_star_import:
        return []  # a star import may bind anything: nothing can be proven missing
    return [(label, name) for label, name in accesses if not _is_bound(name, bindings)]


def _add_needed_imports(
    module: cst.Module,
    accesses: Sequence[tuple[str, str]],
    available: Mapping[str, ImportBinding],
    module_name: str | None,
    block_test: str | None = None,
) -> tuple[cst.Module, list[str]]:
    """Adds the imports of `available` that the `(label, name)` accesses need, merged into the module's imports.

    With `block_test`, the imports go inside the top-level `if <block_test>:` block instead.
    """
    bindings = module_bindings(module, module_name)
    needed, problems = [], []
    for label, name in accesses:
        binding = available.get(name)
        if binding is None:
            continue
        present = bindings.imports.get(name)
        if present is not None:
            if not present.is_compatible_with(binding):
                problems.append(
                    f"`{label}` uses `{name}` as `{binding.origin}`, but the target binds it to `{present.origin}`"
                )
            continue
        if name in bindings.others:
            if binding.module != module_name:
                problems.append(
                    f"`{label}` uses `{name}` as `{binding.origin}`, but the target defines its own `{name}`"
                )
            continue
        if binding.module == module_name:
            continue  # imported from the target itself: left to the undefined-name check
        if binding not in needed:
            needed.append(binding)
    if problems:
        raise TransplantError(problems, module_name or "")
    order = list(available)
    needed.sort(key=lambda binding: order.index(binding.name))  # as the overlay lists them
    added = []
    for binding in needed:
        module, description = _add_import(module, binding, module_name, block_test)
        added.append(description)
    return module, added


def _find_block(module: cst.Module, block_test: str) -> int:
    return next(
        index
        for index, statement in enumerate(module.body)
        if isinstance(statement, cst.If) and _code(statement.test) == block_test
    )


def _add_import(
    module: cst.Module, binding: ImportBinding, module_name: str | None, block_test: str | None
) -> tuple[cst.Module, str]:
    block_index = _find_block(module, block_test) if block_test is not None else None
    statements = list(module.body if block_index is None else module.body[block_index].body.body)
    new_statement = binding.statement_for(module_name)
    new_import = new_statement.body[0]
    # Merge `from m import x` into an existing `from m import ...` of the same block
    if isinstance(new_import, cst.ImportFrom):
        for position, statement in enumerate(statements):
            if not (isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1):
                continue
            existing = statement.body[0]
            if (
                isinstance(existing, cst.ImportFrom)
                and not isinstance(existing.names, cst.ImportStar)
                and existing.module is not None
                and new_import.module is not None
                and _code(existing.module) == _code(new_import.module)
                and len(existing.relative) == len(new_import.relative)
            ):
                names = list(existing.names)
                alias = new_import.names[0]
                if isinstance(names[-1].comma, cst.Comma):
                    # One name a line with a trailing comma: the new name takes the last line, the former last name
                    # gets the separator of the others
                    if len(names) > 1 and isinstance(names[-2].comma, cst.Comma):
                        separator = names[-2].comma
                    elif existing.lpar is not None:
                        separator = cst.Comma(whitespace_after=existing.lpar.whitespace_after)
                    else:
                        separator = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
                    alias = alias.with_changes(comma=names[-1].comma)
                    names[-1] = names[-1].with_changes(comma=separator)
                names.append(alias)
                statements[position] = statement.with_changes(body=[existing.with_changes(names=names)])
                return _replace_statements(module, block_index, statements), _code(statements[position])
    # Otherwise a new statement at the end of the first run of imports (ruff's isort puts it in its place)
    first = next((index for index, statement in enumerate(statements) if _is_import_line(statement)), None)
    if first is None:
        insert_at = 1 if statements and _is_docstring(statements[0]) else 0
    else:
        insert_at = first
        while insert_at < len(statements) and _is_import_line(statements[insert_at]):
            insert_at += 1
    statements.insert(insert_at, new_statement)
    return _replace_statements(module, block_index, statements), _code(new_statement)


def _is_import_line(statement: cst.CSTNode) -> bool:
    return isinstance(statement, cst.SimpleStatementLine) and all(
        isinstance(small, (cst.Import, cst.ImportFrom)) for small in statement.body
    )


def _replace_statements(module: cst.Module, block_index: int | None, statements: list) -> cst.Module:
    if block_index is None:
        return module.with_changes(body=statements)
    body = list(module.body)
    body[block_index] = body[block_index].with_changes(body=body[block_index].body.with_changes(body=statements))
    return module.with_changes(body=body)


# --------------------------------------------------------------------------------------------------------------------
# Test modules


@dataclass
class TestMergeResult:
    source: str
    classes: list[str] = field(default_factory=list)
    helpers: list[str] = field(default_factory=list)
    imports: list[str] = field(default_factory=list)
    created: bool = False
    units: set[str] = field(default_factory=set)  # what the merge may change, keyed like `changed_units`


def merge_test_module(target_source: str | None, ours_source: str, path: str = "test module") -> TestMergeResult:
    """Merges the test classes of `ours_source` (and the helpers and imports they need) into `target_source`.

    Top-level imports go to the target's imports, those of our `if is_torch_available():` block into the target's
    block of the same test (no duplicates: a name the target already binds is not imported again); helpers and test
    classes are appended at the end of the file (before an `if __name__ == "__main__":` block). A test class or
    helper that the target already has is replaced in place if it differs, so merging twice changes nothing.
    """
    # Upstream's model tests import their common testers relatively (`from ...test_modeling_common import ...`)
    module_name = path[: -len(".py")].replace("/", ".") if path.endswith(".py") else None
    ours = cst.parse_module(ours_source)
    if any(
        binding.module.split(".")[0] == "cache_crop_fix"
        for binding in module_bindings(ours, module_name).imports.values()
    ):
        raise TransplantError([f"{path} imports cache_crop_fix: it cannot run upstream"], path)
    created = target_source is None
    if created:
        # A new file: our header (the license) and the merged units, with only the imports they need
        target_source = cst.Module(body=[], header=ours.header).code

    target = cst.parse_module(target_source)
    result = TestMergeResult(source=target_source, created=created)
    top_imports: dict[str, ImportBinding] = {}
    guarded_imports: dict[str, ImportBinding] = {}
    guard_test = None
    units: list[tuple[list[str], cst.BaseStatement]] = []
    for index, statement in enumerate(ours.body):
        if index == 0 and _is_docstring(statement):
            continue
        if _is_import_line(statement):
            for small in statement.body:
                for binding in import_bindings(small, module_name):
                    top_imports[binding.name] = binding
        elif isinstance(statement, cst.If) and _is_availability_guard(statement):
            guard_test = _code(statement.test)
            for inner in statement.body.body:
                if not _is_import_line(inner):
                    raise TransplantError([f"`if {guard_test}:` in {path} may only hold imports"], path)
                for small in inner.body:
                    for binding in import_bindings(small, module_name):
                        guarded_imports[binding.name] = binding
        elif isinstance(statement, cst.If) and _is_main_guard(statement):
            continue
        elif is_type_checking_block(statement):
            continue
        else:
            names = statement_names(statement)
            if not names:
                raise TransplantError([f"top-level statement `{_code(statement)[:60]}` in {path} binds no name"], path)
            units.append((names, statement))

    body = list(target.body)
    main_guard = next((i for i, s in enumerate(body) if isinstance(s, cst.If) and _is_main_guard(s)), len(body))
    roots: dict[str, cst.CSTNode] = {}
    appended = []
    for names, statement in units:
        existing = [i for i, s in enumerate(body) if set(names) & set(statement_names(s))]
        if len(existing) > 1:
            raise TransplantError([f"`{', '.join(names)}` is defined several times in the target"], path)
        if existing:
            new = _with_leading_lines(statement, body[existing[0]].leading_lines)
            body[existing[0]] = new
        else:
            blank_lines = [cst.EmptyLine(indent=False), cst.EmptyLine(indent=False)]
            new = statement.with_changes(leading_lines=[*blank_lines, *_comment_lines(statement.leading_lines)])
            appended.append(new)
        roots[", ".join(names)] = new
        (result.classes if isinstance(statement, cst.ClassDef) else result.helpers).extend(names)
        result.units |= set(_units(cst.Module(body=[statement])))
    body[main_guard:main_guard] = appended
    module = target.with_changes(body=body)

    accesses = _global_accesses(module, roots)
    top_accesses = accesses
    if guarded_imports:
        # The guard itself (`is_torch_available()`) needs its name
        guard_names = [node.value for node in _walk(cst.parse_expression(guard_test)) if isinstance(node, cst.Name)]
        top_accesses = [*accesses, *((f"if {guard_test}", name) for name in guard_names)]
    module, added = _add_needed_imports(module, top_accesses, top_imports, module_name)
    result.imports += added
    if guarded_imports:
        has_block = any(isinstance(s, cst.If) and guard_test == _code(s.test) for s in module.body)
        if not has_block:
            # The target has no such block: add ours (with only what is needed) after the imports
            block = cst.If(
                test=cst.parse_expression(guard_test), body=cst.IndentedBlock([cst.SimpleStatementLine([cst.Pass()])])
            )
            statements = list(module.body)
            last_import = max((i for i, s in enumerate(statements) if _is_import_line(s)), default=-1)
            block = block.with_changes(leading_lines=[cst.EmptyLine(indent=False), cst.EmptyLine(indent=False)])
            statements.insert(last_import + 1, block)
            module = module.with_changes(body=statements)
        module, added = _add_needed_imports(module, accesses, guarded_imports, module_name, block_test=guard_test)
        result.imports += added
        module = _drop_placeholder_pass(module, guard_test)
        result.units.add(f"if {guard_test}")
    result.units.add("imports")
    undefined = _undefined_names(module, accesses, module_name)
    if undefined:
        raise TransplantError(
            [f"`{label}` uses `{name}`, which {path} does not bind" for label, name in undefined], path
        )
    result.source = module.code
    return result


def restrict_test_module(source: str, classes: Iterable[str], path: str = "test module") -> str:
    """`source` with only the test classes `classes` among its classes named `*Test` (the tests of some steps), and
    the top-level helpers (functions, constants, mixins) that they use, directly or through other helpers.
    """
    module = cst.parse_module(source)
    classes = set(classes)
    units = {}  # index -> names, for the statements that may be dropped
    for index, statement in enumerate(module.body):
        if _is_import_line(statement) or isinstance(statement, cst.If) or _is_docstring(statement):
            continue
        names = statement_names(statement)
        if names:
            units[index] = names
    unknown = classes - {name for names in units.values() for name in names}
    if unknown:
        raise TransplantError([f"test class `{name}` is not defined" for name in sorted(unknown)], path)
    by_name = {name: index for index, names in units.items() for name in names}
    wanted = [index for index, names in units.items() if set(names) & classes]
    kept = set()
    while wanted:
        index = wanted.pop()
        if index in kept:
            continue
        kept.add(index)
        used = {node.value for node in _walk(module.body[index]) if isinstance(node, cst.Name)}
        wanted += [by_name[name] for name in used if name in by_name]
    body = [statement for index, statement in enumerate(module.body) if index not in units or index in kept]
    return module.with_changes(body=body).code


def test_classes(source: str) -> list[str]:
    """The test classes of a test module: its top-level classes whose name ends with `Test`."""
    return [
        statement.name.value
        for statement in cst.parse_module(source).body
        if isinstance(statement, cst.ClassDef) and statement.name.value.endswith("Test")
    ]


def _is_availability_guard(statement: cst.If) -> bool:
    test = statement.test
    return isinstance(test, cst.Call) and isinstance(test.func, cst.Name) and test.func.value.startswith("is_")


def _is_main_guard(statement: cst.If) -> bool:
    return _code(statement.test).replace("'", '"') == '__name__ == "__main__"'


def _drop_placeholder_pass(module: cst.Module, block_test: str) -> cst.Module:
    """Removes the `pass` that held the place of the imports in a block this merge created."""
    index = _find_block(module, block_test)
    block = module.body[index]
    statements = [statement for statement in block.body.body if not _is_pass(statement)]
    if not statements or len(statements) == len(block.body.body):
        return module
    body = list(module.body)
    body[index] = block.with_changes(body=block.body.with_changes(body=statements))
    return module.with_changes(body=body)


# --------------------------------------------------------------------------------------------------------------------
# Minimality: which top-level units two versions of a module differ in


def changed_units(before: str, after: str) -> set[str]:
    """Names of the top-level units (`Class.method`, functions, the import block, other statements) that differ.

    Used to prove that an export touches nothing the overlay does not change.
    """
    old, new = _units(cst.parse_module(before)), _units(cst.parse_module(after))
    return {key for key in old.keys() | new.keys() if old.get(key) != new.get(key)}


def _units(module: cst.Module) -> dict[str, str]:
    units: dict[str, str] = {}
    code = cst.Module([]).code_for_node
    for statement in module.body:
        if isinstance(statement, cst.ClassDef):
            name = statement.name.value
            units[f"class {name}"] = code(statement.with_changes(body=cst.IndentedBlock([]), leading_lines=[]))
            for member in statement.body.body:
                key = (
                    f"{name}.{member.name.value}" if isinstance(member, cst.FunctionDef) else f"{name}: {code(member)}"
                )
                # A one-line class body (`class Unset: ...`) holds small statements, which have no leading lines
                leading = getattr(member, "leading_lines", None)
                units[key] = code(
                    member if leading is None else member.with_changes(leading_lines=_comment_lines(leading))
                )
        elif _is_import_line(statement):
            units.setdefault("imports", "")
            units["imports"] += code(statement.with_changes(leading_lines=[]))
        else:
            names = statement_names(statement)
            if names:
                key = ", ".join(names)
            elif isinstance(statement, cst.If):
                key = f"if {_code(statement.test)}"
            else:
                key = code(statement.with_changes(leading_lines=[]))
            units[key] = code(statement.with_changes(leading_lines=_comment_lines(statement.leading_lines)))
    return units


# --------------------------------------------------------------------------------------------------------------------
# One step of the stack: its overlay into upstream's modules (and their modular files), its tests into upstream's tests


@dataclass
class FileChange:
    path: str
    source: str  # the new content
    base: str | None  # the content before this step (`None`: created)
    expected_units: set[str] = field(default_factory=set)  # what this step may change, keyed like `changed_units`
    summary: list[str] = field(default_factory=list)
    is_test: bool = False


def transplant_step(
    overlays: Sequence[OverlayModule],
    tests: Mapping[str, Sequence[str]],
    test_sources: Mapping[str, str],
    read: Callable[[str], str | None],
    modular_counterpart: Callable[[str], str | None],
) -> tuple[dict[str, FileChange], list[str]]:
    """The files one step changes, from `read(path)`: their content after the previous step (or in the base).

    Returns the changes and notes for people. `tests` maps each upstream test path to the test classes the file
    holds after this step (this step's and every earlier one's).
    """
    changes: dict[str, FileChange] = {}
    notes = []
    for module in overlays:
        targets = [(module.target_path, module.module_name, False)]
        modular = modular_counterpart(module.target_path)
        if modular is not None and read(modular) is not None:
            targets.append((modular, modular[len("src/") : -len(".py")].replace("/", "."), True))
        for path, module_name, is_modular in targets:
            previous = changes.get(path)
            before = read(path)
            result = transplant(
                previous.source if previous else before, module, module_name, allow_missing_classes=is_modular
            )
            if is_modular and result.skipped_classes:
                notes.append(
                    f"{path} does not define {', '.join(result.skipped_classes)}: only the generated modeling "
                    "file changes for them"
                )
            if result.source == before:
                continue
            change = previous or FileChange(path, result.source, before)
            change.source = result.source
            change.expected_units |= result.changed_units | ({"imports"} if result.imports else set())
            change.summary += [f"replace `{name}`" for name in result.replaced]
            change.summary += [f"add `{name}`" for name in result.added]
            change.summary += [f"add helper `{name}`" for name in result.helpers]
            changes[path] = change
    for path, classes in tests.items():
        before = read(path)
        result = merge_test_module(before, restrict_test_module(test_sources[path], classes, path), path)
        if result.source == before:
            continue
        change = FileChange(path, result.source, before, is_test=True)
        change.expected_units = result.units
        new_classes = [name for name in result.classes if before is None or f"class {name}" not in _units_of(before)]
        change.summary = ["new file" if result.created else "tests merged into upstream's file"]
        change.summary += [f"test class `{name}`" for name in new_classes]
        changes[path] = change
    return changes, notes


def _units_of(source: str) -> dict[str, str]:
    return _units(cst.parse_module(source))
