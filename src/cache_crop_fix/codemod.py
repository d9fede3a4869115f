"""One-statement codemods of upstream methods, for call sites where a single call changes.

An overlay normally holds our own version of a method it changes. When only one statement of a long upstream method
changes (e.g. PI0's `sample_actions` rolls its cache back with `crop(prefix_length)`), a copy of the method would be
mostly upstream's code: the overlay module declares the change instead, in `CODEMODS`::

    CODEMODS = {"Class.method": ("old_statement(x)", "new_statement(x)"), "function": [(...), (...)]}

The patcher applies it to the upstream method's source at run time (after checking its fingerprint), and the exporter
to upstream's file: the pull request changes that statement only. The old statement must occur exactly once in the
method, on a line of its own (a block of lines, such as an `if` and its body, on consecutive lines); a list of such
pairs changes several statements, in order. Several steps may change one method: their codemods apply in step order,
each to the method as the steps before it left it. A module-level function (a label without a class) is changed in
place, by swapping its code object: the modules that imported it by name (`from ..masking_utils import
create_causal_mask`) run the change too. A backport's step that makes the same change as a step of the main line
imports that step's codemods (`from cache_crop_fix.overlay.v5_25.<step>.<module> import CODEMODS`).
"""

from __future__ import annotations

import ast


CODEMODS_NAME = "CODEMODS"


class CodemodError(ValueError):
    pass


def statement_changes(codemod: tuple[str, str] | list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The `(old, new)` statement pairs of one label's codemod: one pair, or a list of them."""
    return [codemod] if isinstance(codemod[0], str) else list(codemod)


def rewrite_statement(source: str, old: str, new: str, where: str = "the method") -> str:
    """Replaces the line `old` (stripped of its indentation) with `new`, indented the same way. `old` may be a block of
    consecutive lines (a compound statement, e.g. an `if` and its body), compared line by line without indentation."""
    lines = source.splitlines(keepends=True)
    wanted = [line.strip() for line in old.splitlines()]
    stripped = [line.strip() for line in lines]
    hits = [index for index in range(len(lines)) if stripped[index : index + len(wanted)] == wanted]
    if len(hits) != 1:
        raise CodemodError(f"{where}: expected the statement `{old}` exactly once, found it {len(hits)} times")
    line = lines[hits[0]]
    indent = line[: len(line) - len(line.lstrip())]
    replacement = "".join(f"{indent}{new_line}\n" if new_line.strip() else "\n" for new_line in new.splitlines())
    return "".join(lines[: hits[0]]) + replacement + "".join(lines[hits[0] + len(wanted) :])


def rewrite_method(module_source: str, label: str, old: str, new: str) -> str:
    """Applies the codemod of `label` (`Class.method`, or `function` at module level) to a whole module's source: only
    that method's lines change."""
    class_name, _, method_name = label.rpartition(".")
    for node in ast.parse(module_source).body:
        if class_name and isinstance(node, ast.ClassDef) and node.name == class_name:
            candidates = node.body
        elif not class_name:
            candidates = [node]
        else:
            continue
        for member in candidates:
            if isinstance(member, (ast.FunctionDef, ast.AsyncFunctionDef)) and member.name == method_name:
                lines = module_source.splitlines(keepends=True)
                start, end = member.lineno - 1, member.end_lineno
                if _contains_block(lines[start:end], new):
                    return module_source  # already rewritten
                method = rewrite_statement("".join(lines[start:end]), old, new, f"`{label}`")
                return "".join(lines[:start]) + method + "".join(lines[end:])
    raise CodemodError(f"`{label}` is not defined in the module")


def _contains_block(lines: list[str], block: str) -> bool:
    """Whether `lines` hold the lines of `block` in a row (compared without their indentation)."""
    wanted = [line.strip() for line in block.splitlines()]
    stripped = [line.strip() for line in lines]
    return any(stripped[index : index + len(wanted)] == wanted for index in range(len(stripped)))
