"""The semantic mutant family of `utils/mutation_testing.py --family semantic`: mutants generated from the AST of an
overlay file, for the mistakes a crop or a rollback is likely to get wrong (not single operators):

- `delete`: a statement deleted (replaced by `pass`);
- `swap`: two adjacent statements swapped;
- `check-moved`: a check (`if ...: raise ...`, or a call of a `*check*`/`*validate*` function) moved past the next
  statement of its block that changes state (an attribute or item assigned, a call);
- `alias`: aliasing instead of copying (`x.clone()`/`x.copy()`/`x[:]` -> `x`, `dst.copy_(src)` -> `dst = src`);
- `new-tensor`: a new tensor instead of an in-place update (`x.sub_(y)` -> `x = x.sub(y)`,
  `x.zero_()` -> `x = torch.zeros_like(x)`, `x.fill_(v)` -> `x = torch.full_like(x, v)`);
- `off-by-one`: a bound of a history off by one: slice bounds and negative indices involving names (`[-k:]` ->
  `[-(k + 1):]` / `[-(k - 1):]`), the right side of a comparison with a length (`len(...)`, `maxlen`, `*length*`,
  `*num_tokens*`, `*to_keep*`, `*window*`), and keyword arguments that bound a history (`maxlen=k`,
  `*_to_keep=k`, `*length=k`) -> `k + 1` / `k - 1`;
- `flag`: an assignment of `True`/`False`/`None`/`0` to an attribute or item removed or its value flipped
  (`True` <-> `False`, `0` -> `1`).

Only function bodies are mutated (module and class level code is imports and names). Each mutant is a text splice
of the original file (the rest keeps its lines, comments and formatting), so the patcher reads it as it reads ours.
Mutants that give the same program (the same `ast.dump` after parsing) are kept once, the first in the order of the
kinds above (so a check moved past its next statement is a `check-moved`, not a `swap`). Left out as redundant:
- a statement swapped with a following `return`/`raise`/`break`/`continue`: it is then never run, the `delete`
  mutant of that statement;
- two adjacent assignments to local names that commute (neither reads or writes what the other writes, and neither
  calls anything but `len`, `min`, `max`, `int`, `isinstance`, `getattr`, `type`, `range`): the same program.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from dataclasses import dataclass, replace


KINDS = ("flag", "check-moved", "alias", "new-tensor", "off-by-one", "delete", "swap")

PURE_CALLS = {"len", "min", "max", "int", "isinstance", "getattr", "type", "range"}
BOUND_NAMES = re.compile(r"len|length|maxlen|num_tokens|to_keep|window", re.I)
BOUND_KEYWORDS = re.compile(r"maxlen|_to_keep$|length$", re.I)
CHECK_CALLS = re.compile(r"check|validate", re.I)
# in-place tensor methods and the expression that makes a new tensor instead (`{x}`: the receiver, `{args}`)
NEW_TENSOR = {
    "zero_": "torch.zeros_like({x})",
    "fill_": "torch.full_like({x}, {args})",
}
OUT_OF_PLACE = {"add_", "sub_", "mul_", "div_", "clamp_", "masked_fill_", "index_fill_", "index_copy_", "scatter_"}


@dataclass(frozen=True)
class Mutant:
    kind: str
    start: tuple[int, int]  # (line, column) of the first changed character, 1-based lines as in `ast`
    end: tuple[int, int]
    replacement: str  # the text that replaces [start, end)
    description: str  # one line, stable across unrelated edits (the key of an argument in `mutation_equivalents`)

    def apply(self, source: str) -> str:
        lines = source.splitlines(keepends=True)
        offsets = [0]
        for line in lines:
            offsets.append(offsets[-1] + len(line))

        def offset(position):
            line, column = position
            if line > len(lines):  # the end of the file
                return offsets[-1]
            return offsets[line - 1] + len(lines[line - 1].encode()[:column].decode())

        return source[: offset(self.start)] + self.replacement + source[offset(self.end) :]


def _short(node: ast.AST, limit: int = 90) -> str:
    text = " ".join(ast.unparse(node).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _bodies(function: ast.AST):
    """Every statement list inside a function (its body, branches, loop bodies, handlers), nested ones included."""
    for node in ast.walk(function):
        for field in ("body", "orelse", "finalbody"):
            body = getattr(node, field, None)
            if isinstance(body, list) and body and isinstance(body[0], ast.stmt):
                if node is not function and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    continue  # nested definitions are walked as functions of their own
                yield body
        if isinstance(node, ast.Try):
            for handler in node.handlers:
                yield handler.body


def _is_docstring(statement: ast.stmt) -> bool:
    return (
        isinstance(statement, ast.Expr)
        and isinstance(statement.value, ast.Constant)
        and isinstance(statement.value.value, str)
    )


def _is_check(statement: ast.stmt) -> bool:
    if isinstance(statement, ast.If) and not statement.orelse:
        return isinstance(statement.body[-1], ast.Raise)
    if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call):
        function = statement.value.func
        name = function.attr if isinstance(function, ast.Attribute) else getattr(function, "id", "")
        return bool(CHECK_CALLS.search(name))
    return False


def _changes_state(statement: ast.stmt) -> bool:
    for node in ast.walk(statement):
        if isinstance(node, (ast.Attribute, ast.Subscript)) and isinstance(node.ctx, (ast.Store, ast.Del)):
            return True
        if isinstance(node, ast.Call):
            function = node.func
            name = function.attr if isinstance(function, ast.Attribute) else getattr(function, "id", "")
            if name not in PURE_CALLS and not CHECK_CALLS.search(name):
                return True
    return False


def _commutes(first: ast.stmt, second: ast.stmt) -> bool:
    def simple(statement):
        if not isinstance(statement, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            return None
        targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
        written = set()
        for target in targets:
            for node in ast.walk(target):
                if isinstance(node, (ast.Attribute, ast.Subscript)):
                    return None
                if isinstance(node, ast.Name):
                    written.add(node.id)
        read = set()
        for node in ast.walk(statement.value) if statement.value is not None else ():
            if isinstance(node, ast.Call) and not (isinstance(node.func, ast.Name) and node.func.id in PURE_CALLS):
                return None
            if isinstance(node, (ast.NamedExpr, ast.Await, ast.Yield, ast.YieldFrom)):
                return None
            if isinstance(node, ast.Name):
                read.add(node.id)
        if isinstance(statement, ast.AugAssign):
            read |= written
        return written, read

    a, b = simple(first), simple(second)
    if a is None or b is None:
        return False
    return not (a[0] & (b[0] | b[1])) and not (b[0] & a[1])


class _Source:
    def __init__(self, source: str):
        self.source = source
        self.lines = source.splitlines(keepends=True)

    def whole_lines(self, statement: ast.stmt) -> bool:
        """The statement is alone on its lines (no `a; b`, nothing after it but a comment)."""
        before = self.lines[statement.lineno - 1][: statement.col_offset]
        after = self.lines[statement.end_lineno - 1].encode()[statement.end_col_offset :].decode()
        return not before.strip() and (not after.strip() or after.strip().startswith("#"))

    def text(self, first_line: int, last_line: int) -> str:
        return "".join(self.lines[first_line - 1 : last_line])

    def indent(self, statement: ast.stmt) -> str:
        return self.lines[statement.lineno - 1][: statement.col_offset]

    def segment(self, node: ast.AST) -> str:
        return ast.get_source_segment(self.source, node)


def _lines_span(first: ast.stmt, last: ast.stmt) -> tuple[tuple[int, int], tuple[int, int]]:
    return (first.lineno, 0), (last.end_lineno + 1, 0)


def _statement_mutants(src: _Source, body: list[ast.stmt]):
    statements = [s for s in body if not _is_docstring(s)]
    for index, statement in enumerate(body):
        if _is_docstring(statement) or isinstance(statement, ast.Pass) or not src.whole_lines(statement):
            continue
        following = body[index + 1 :]
        # flag: an attribute or item set to True/False/None/0, removed or flipped
        if (
            isinstance(statement, ast.Assign)
            and len(statement.targets) == 1
            and isinstance(statement.targets[0], (ast.Attribute, ast.Subscript))
            and isinstance(statement.value, ast.Constant)
            and statement.value.value in (True, False, None, 0)
        ):
            value = statement.value.value
            start, end = _lines_span(statement, statement)
            yield Mutant("flag", start, end, src.indent(statement) + "pass\n", f"removed: {_short(statement)}")
            flipped = {"True": "False", "False": "True", "0": "1"}.get(repr(value))
            if flipped is not None:
                node = statement.value
                yield Mutant(
                    "flag",
                    (node.lineno, node.col_offset),
                    (node.end_lineno, node.end_col_offset),
                    flipped,
                    f"flipped to {flipped}: {_short(statement)}",
                )
        # check-moved: past the next statement of the block that changes state
        if _is_check(statement):
            for position, later in enumerate(following):
                if not src.whole_lines(later):
                    break
                if _changes_state(later):
                    moved = src.text(following[0].lineno, later.end_lineno)
                    own = src.text(statement.lineno, statement.end_lineno)
                    shift = len(src.indent(later)) - len(src.indent(statement))
                    assert shift == 0
                    start, end = (statement.lineno, 0), (later.end_lineno + 1, 0)
                    yield Mutant(
                        "check-moved",
                        start,
                        end,
                        moved + own,
                        f"{_short(statement, 60)} moved past {_short(later, 60)}",
                    )
                    break
        # delete: the statement (a block left empty gets `pass`)
        if len(statements) >= 1:
            start, end = _lines_span(statement, statement)
            yield Mutant("delete", start, end, src.indent(statement) + "pass\n", f"deleted: {_short(statement)}")
    for first, second in zip(body, body[1:]):
        if any(_is_docstring(s) or not src.whole_lines(s) for s in (first, second)):
            continue
        if isinstance(second, (ast.Return, ast.Raise, ast.Break, ast.Continue)) or _commutes(first, second):
            continue
        between = src.text(first.end_lineno + 1, second.lineno - 1)
        text = src.text(second.lineno, second.end_lineno) + between + src.text(first.lineno, first.end_lineno)
        start, end = _lines_span(first, second)
        yield Mutant("swap", start, end, text, f"swapped: {_short(first, 60)} <-> {_short(second, 60)}")


def _expression_mutants(src: _Source, function: ast.AST):
    def splice(kind, node, replacement, description):
        return Mutant(
            kind, (node.lineno, node.col_offset), (node.end_lineno, node.end_col_offset), replacement, description
        )

    def wrap(text, node):
        simple = (ast.Name, ast.Attribute, ast.Subscript, ast.Call, ast.Constant)
        return text if isinstance(node, simple) else f"({text})"

    def plus_minus(kind, node, what):
        text = src.segment(node)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            inner = src.segment(node.operand)
            for sign in ("+", "-"):
                yield splice(kind, node, f"-({inner} {sign} 1)", f"{what} {text} -> -({inner} {sign} 1)")
        else:
            for sign in ("+", "-"):
                yield splice(kind, node, f"{wrap(text, node)} {sign} 1", f"{what} {text} -> {text} {sign} 1")

    def has_name(node):
        return any(isinstance(n, ast.Name) for n in ast.walk(node))

    def names_a_bound(node):
        for n in ast.walk(node):
            name = n.attr if isinstance(n, ast.Attribute) else getattr(n, "id", "")
            if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "len":
                return True
            if name and BOUND_NAMES.search(name):
                return True
        return False

    nested = {
        id(n)
        for inner in ast.walk(function)
        if inner is not function and isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        for n in ast.walk(inner)
    }
    for statement in (s for body in _bodies(function) for s in body):
        annotations = {
            id(n) for a in ast.walk(statement) if isinstance(a, ast.AnnAssign) for n in ast.walk(a.annotation)
        }
        headers = [statement]
        if isinstance(statement, (ast.If, ast.While)):
            headers = [statement.test]
        elif isinstance(statement, (ast.For, ast.AsyncFor)):
            headers = [statement.target, statement.iter]
        elif isinstance(statement, (ast.With, ast.AsyncWith)):
            headers = statement.items
        elif isinstance(statement, ast.Try):
            headers = []
        elif isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            headers = []
        for header in headers:
            for node in ast.walk(header):
                if id(node) in annotations or id(node) in nested:
                    continue
                # alias: a copy dropped
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                    method, receiver = node.func.attr, node.func.value
                    if method in ("clone", "copy") and not node.args and not node.keywords:
                        yield splice(
                            "alias",
                            node,
                            wrap(src.segment(receiver), receiver),
                            f"{_short(node)} -> {_short(receiver)}",
                        )
                if (
                    isinstance(node, ast.Subscript)
                    and isinstance(node.slice, ast.Slice)
                    and node.slice.lower is node.slice.upper is node.slice.step is None
                    and isinstance(node.ctx, ast.Load)
                ):
                    yield splice(
                        "alias",
                        node,
                        wrap(src.segment(node.value), node.value),
                        f"{_short(node)} -> {_short(node.value)}",
                    )
                # off-by-one: slice bounds and negative indices with names
                if isinstance(node, ast.Subscript):
                    bounds = []
                    if isinstance(node.slice, ast.Slice):
                        bounds = [b for b in (node.slice.lower, node.slice.upper) if b is not None and has_name(b)]
                    elif (
                        isinstance(node.slice, ast.UnaryOp)
                        and isinstance(node.slice.op, ast.USub)
                        and has_name(node.slice)
                    ):
                        bounds = [node.slice]
                    for bound in bounds:
                        yield from plus_minus("off-by-one", bound, f"bound of {_short(node, 60)}:")
                if (
                    isinstance(node, ast.Compare)
                    and len(node.ops) == 1
                    and not isinstance(node.ops[0], (ast.Is, ast.IsNot, ast.In, ast.NotIn))
                    and names_a_bound(node)
                ):
                    if has_name(node.comparators[0]):
                        yield from plus_minus("off-by-one", node.comparators[0], f"in {_short(node, 60)}:")
                if isinstance(node, ast.Call):
                    for keyword in node.keywords:
                        if keyword.arg and BOUND_KEYWORDS.search(keyword.arg) and has_name(keyword.value):
                            yield from plus_minus("off-by-one", keyword.value, f"{keyword.arg}=")
        # alias / new-tensor: in-place updates as statements
        if (
            isinstance(statement, ast.Expr)
            and isinstance(statement.value, ast.Call)
            and isinstance(statement.value.func, ast.Attribute)
            and isinstance(statement.value.func.value, (ast.Name, ast.Attribute, ast.Subscript))
            and src.whole_lines(statement)
        ):
            call = statement.value
            method, receiver = call.func.attr, src.segment(call.func.value)
            args = ", ".join(src.segment(a) for a in [*call.args, *call.keywords])
            if method == "copy_" and len(call.args) == 1 and not call.keywords:
                text = f"{receiver} = {src.segment(call.args[0])}"
                yield splice("alias", statement, text, f"{_short(statement)} -> {text}")
            elif method in NEW_TENSOR:
                text = f"{receiver} = " + NEW_TENSOR[method].format(x=receiver, args=args)
                yield splice("new-tensor", statement, text, f"{_short(statement)} -> {text}")
            elif method in OUT_OF_PLACE:
                text = f"{receiver} = {receiver}.{method[:-1]}({args})"
                yield splice("new-tensor", statement, text, f"{_short(statement)} -> {text}")


def mutants(source: str) -> list[Mutant]:
    """The semantic mutants of one file, deduplicated (see the module's docstring), in a stable order."""
    tree = ast.parse(source)
    src = _Source(source)
    functions = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    candidates = []
    for function in functions:
        for body in _bodies(function):
            candidates += list(_statement_mutants(src, body))
        candidates += list(_expression_mutants(src, function))
    candidates.sort(key=lambda m: (KINDS.index(m.kind), m.start, m.end, m.description))
    seen = {ast.dump(tree)}
    kept = []
    for mutant in candidates:
        try:
            dump = ast.dump(ast.parse(mutant.apply(source)))
        except SyntaxError:
            continue
        if dump not in seen:
            seen.add(dump)
            kept.append(mutant)
    # The same statement can appear in several methods (`return`, `super().crop(...)`): the description names the
    # innermost function, so that each argument in `mutation_equivalents` is about one mutant
    spans = []

    def qualify(node, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    spans.append((child.lineno, child.end_lineno, name))
                qualify(child, name + ".")

    qualify(tree, "")
    kept = [
        replace(
            m,
            description=f"{max((s for s in spans if s[0] <= m.start[0] <= s[1]), key=lambda s: s[0])[2]}: "
            f"{m.description}",
        )
        for m in kept
    ]
    kept.sort(key=lambda m: (m.start, KINDS.index(m.kind), m.description))
    # and the same statement twice in one function is numbered in the order of the source
    counts = Counter((m.kind, m.description) for m in kept)
    seen_keys: Counter = Counter()
    for index, m in enumerate(kept):
        if counts[m.kind, m.description] > 1:
            seen_keys[m.kind, m.description] += 1
            kept[index] = replace(m, description=f"{m.description} [{seen_keys[m.kind, m.description]}]")
    return kept
