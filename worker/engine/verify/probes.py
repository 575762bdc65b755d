"""The judge's style probes: rewrites of a candidate that keep what it does and change only how it
reads. A judge whose P(YES) moves across them is judging style.

Kinds (STYLE_REWRITES), each made on the Python files the candidate changes, in the code it touches:
- `comments_removed`: the comments on the lines it adds, gone (a comment-only line goes whole);
- `reformatted`: each function it touches printed again from its syntax tree (Python's own layout,
  which also drops those functions' comments);
- `locals_renamed`: in each function it touches, the plain local variables renamed (`value_1`, ...):
  not parameters, not names declared global or nonlocal, not in a function with nested scopes or
  f-strings.

A rewrite is kept only when it differs from the candidate and its syntax tree is the candidate's
(for `locals_renamed`, once the names are mapped back): it cannot change behaviour. The grading of
each rewrite is checked against the candidate's as well, by whoever grades them.
"""

import ast
import tokenize
from dataclasses import dataclass, field
from typing import Optional

from worker.engine.grade.source_edits import added_lines, file_diff, parses, python_tokens

STYLE_REWRITES = ("comments_removed", "reformatted", "locals_renamed")


@dataclass(frozen=True)
class Rewrite:
    kind: str
    patch: str  # against the base commit, like the candidate
    files: list[str] = field(default_factory=list)  # the files it rewrote


def style_rewrites(patch: str, files: dict[str, tuple[Optional[str], Optional[str]]]) -> list[Rewrite]:
    """At most one rewrite of each kind. `files`: path -> (text at the base commit, text with the
    candidate applied), None where the file does not exist, for the files the candidate changes."""
    added = added_lines(patch)
    made = []
    for kind, rewrite in (("comments_removed", _comments_removed), ("reformatted", _reformatted),
                          ("locals_renamed", _locals_renamed)):
        texts, rewritten = {}, []
        for path, (before, after) in sorted(files.items()):
            text = after
            if path.endswith(".py") and after is not None and added.get(path) and parses(after):
                found = rewrite(after, sorted(added[path]))
                if found is not None and found != after and parses(found):
                    text = found
                    rewritten.append(path)
            texts[path] = (before, text)
        if rewritten:
            whole = "".join(file_diff(path, before, text) for path, (before, text) in texts.items()
                            if text is not None and text != before)
            made.append(Rewrite(kind, whole, rewritten))
    return made


def _same_tree(a: str, b: str) -> bool:
    return ast.dump(ast.parse(a)) == ast.dump(ast.parse(b))


def _comments_removed(text: str, lines: list[int]) -> Optional[str]:
    wanted = set(lines)
    comments = [token for token in python_tokens(text) if token.type == tokenize.COMMENT and token.start[0] in wanted]
    if not comments:
        return None
    rows = text.splitlines(keepends=True)
    gone = set()
    for token in comments:
        row, column = token.start
        kept = rows[row - 1][:column].rstrip()
        if kept:
            ending = "\n" if rows[row - 1].endswith("\n") else ""
            rows[row - 1] = kept + ending
        else:
            gone.add(row)
    result = "".join(row for number, row in enumerate(rows, 1) if number not in gone)
    return result if parses(result) and _same_tree(result, text) else None


def _touched_functions(tree: ast.AST, lines: list[int]) -> list[ast.FunctionDef]:
    """The innermost functions holding an added line, outermost first, none inside another."""
    wanted = set(lines)
    found = [node for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
             and wanted & set(range(node.lineno, node.end_lineno + 1))]
    outer = [f for f in found if not any(g is not f and g.lineno <= f.lineno and f.end_lineno <= g.end_lineno
                                         for g in found)]
    return sorted(outer, key=lambda node: node.lineno)


def _reformatted(text: str, lines: list[int]) -> Optional[str]:
    tree = ast.parse(text)
    rows = text.splitlines(keepends=True)
    for function in reversed(_touched_functions(tree, lines)):  # from the end: earlier line numbers hold
        start = min([function.lineno] + [d.lineno for d in function.decorator_list])
        indent = rows[start - 1][:function.col_offset]
        if indent.strip():  # a def that does not start its line
            return None
        printed = "".join(f"{indent}{line}\n" if line else "\n" for line in ast.unparse(function).split("\n"))
        rows[start - 1:function.end_lineno] = [printed]
    result = "".join(rows)
    return result if parses(result) and _same_tree(result, text) else None


def _locals_renamed(text: str, lines: list[int]) -> Optional[str]:
    tree = ast.parse(text)
    taken = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)} | {
        node.arg for node in ast.walk(tree) if isinstance(node, ast.arg)}
    edits, mapping = [], {}
    for function in _touched_functions(tree, lines):
        names = _plain_locals(function)
        for name in sorted(names):
            number = 1
            while f"value_{number}" in taken:
                number += 1
            taken.add(f"value_{number}")
            mapping[f"value_{number}"] = name
            edits += [(node.lineno, node.col_offset, node.end_col_offset, f"value_{number}")
                      for node in ast.walk(function) if isinstance(node, ast.Name) and node.id == name]
    if not edits:
        return None
    rows = text.splitlines(keepends=True)
    for row, start, end, new in sorted(edits, reverse=True):
        rows[row - 1] = rows[row - 1][:start] + new + rows[row - 1][end:]
    result = "".join(rows)
    if not parses(result):
        return None
    back = ast.parse(result)
    for node in ast.walk(back):
        if isinstance(node, ast.Name) and node.id in mapping:
            node.id = mapping[node.id]
    return result if ast.dump(back) == ast.dump(tree) else None


def _plain_locals(function: ast.FunctionDef) -> set[str]:
    """Names only this function's own body binds by assignment, that nothing else could see by name."""
    inner = [node for node in ast.walk(function) if node is not function and isinstance(
        node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.ListComp, ast.SetComp,
               ast.DictComp, ast.GeneratorExp, ast.JoinedStr))]
    declared = any(isinstance(node, (ast.Global, ast.Nonlocal)) for node in ast.walk(function))
    if inner or declared:
        return set()
    calls_by_name = {node.func.id for node in ast.walk(function)
                     if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)}
    if calls_by_name & {"locals", "vars", "eval", "exec", "dir"}:
        return set()
    parameters = {a.arg for a in function.args.args + function.args.posonlyargs + function.args.kwonlyargs}
    parameters |= {a.arg for a in (function.args.vararg, function.args.kwarg) if a}
    stored = {node.id for node in ast.walk(function) if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store)}
    return stored - parameters
