"""Known-wrong candidates made from a task's gold patch: each changes the fixed code the way a
plausible wrong fix would, in a line the gold patch added, and records how it was made.

Kinds (MUTANT_KINDS): a flipped comparison, an off-by-one bound, a deleted statement, a swallowed
exception, a hard-coded return value, a reverted hunk of a multi-hunk fix; and `tampering`: one of
those wrong mutants that also adds a `conftest.py` making every test pass, which grading must drop.
A mutant is kept only when the mutated file still parses and differs from the fix. The hidden tests
catch a mutant (it does not resolve the task) or let it survive.

Input is plain data: the gold patch, and each file it changes before and after the fix.
"""

import ast
import tokenize
from dataclasses import dataclass, field
from typing import Optional

from unidiff import PatchSet
from unidiff.errors import UnidiffParseError

from worker.engine.grade.source_edits import added_lines, file_diff, parses, python_tokens

MUTANT_KINDS = ("flipped_comparison", "off_by_one", "deleted_statement", "swallowed_exception",
                "hard_coded_return", "reverted_hunk", "tampering")
FLIPS = {"==": "!=", "!=": "==", "<": ">=", ">=": "<", ">": "<=", "<=": ">", "is": "is not", "in": "not in"}
PASSING_CONFTEST = ("import pytest\n\n\n@pytest.hookimpl(hookwrapper=True)\n"
                    "def pytest_runtest_makereport(item, call):\n    outcome = yield\n"
                    "    report = outcome.get_result()\n    report.outcome = 'passed'\n")


@dataclass(frozen=True)
class Mutant:
    kind: str
    patch: str  # against the base commit, like any candidate
    made: dict = field(default_factory=dict)  # {"file", "line", "description", "based_on"}


def mutants_make(gold_patch: str, files: dict[str, tuple[Optional[str], Optional[str]]]) -> list[Mutant]:
    """At most one mutant of each kind. `files`: path -> (text before the fix, text after it),
    None where the file does not exist, for the Python files the gold patch changes."""
    added = added_lines(gold_patch)
    made: list[Mutant] = []
    for kind, mutate in (("flipped_comparison", _flip_comparison), ("off_by_one", _off_by_one),
                         ("deleted_statement", _delete_statement), ("swallowed_exception", _swallow_exception),
                         ("hard_coded_return", _hard_code_return)):
        for path in sorted(files):
            before, after = files[path]
            if not path.endswith(".py") or after is None or not added.get(path) or not parses(after):
                continue  # Python 2 code, say: no mutant of it
            found = mutate(after, sorted(added[path]))
            if found is not None and found[0] != after and parses(found[0]):
                text, line, description = found
                made.append(Mutant(kind, file_diff(path, before, text), {"file": path, "line": line,
                                                                      "description": description}))
                break
    reverted = _revert_one_hunk(gold_patch)
    if reverted is not None:
        made.append(reverted)
    if made:
        wrong = made[0]
        made.append(Mutant("tampering", wrong.patch + file_diff("conftest.py", None, PASSING_CONFTEST), {
            **wrong.made, "based_on": wrong.kind,
            "description": f"{wrong.made['description']}, and a conftest.py that makes every test pass"}))
    return made


def _replace(text: str, line: int, start: int, end: int, new: str) -> str:
    lines = text.splitlines(keepends=True)
    lines[line - 1] = lines[line - 1][:start] + new + lines[line - 1][end:]
    return "".join(lines)


def _flip_comparison(text: str, lines: list[int]):
    tokens = python_tokens(text)
    for i, token in enumerate(tokens):
        if token.start[0] not in lines:
            continue
        if token.type == tokenize.OP and token.string in FLIPS:
            flipped = FLIPS[token.string]
        elif token.type == tokenize.NAME and token.string in ("is", "in"):
            following = tokens[i + 1].string if i + 1 < len(tokens) else ""
            if following == "not" or (token.string == "in" and _in_for_loop(tokens, i)):
                continue
            flipped = FLIPS[token.string]
        else:
            continue
        return (_replace(text, token.start[0], token.start[1], token.end[1], flipped), token.start[0],
                f"`{token.string}` flipped to `{flipped}`")
    return None


def _in_for_loop(tokens: list, index: int) -> bool:
    """An `in` that belongs to a `for` on the same line (a loop or a comprehension), not a test."""
    line = tokens[index].start[0]
    return any(token.string == "for" and token.start[0] == line for token in tokens[:index])


def _off_by_one(text: str, lines: list[int]):
    for token in python_tokens(text):
        if token.start[0] in lines and token.type == tokenize.NUMBER and token.string.isdigit():
            bumped = str(int(token.string) + 1)
            return (_replace(text, token.start[0], token.start[1], token.end[1], bumped), token.start[0],
                    f"{token.string} made {bumped}")
    return None


def _statements(text: str, lines: list[int], kinds: tuple) -> list[ast.stmt]:
    """Statements of the given kinds lying wholly on added lines, in order."""
    wanted = set(lines)
    return sorted((node for node in ast.walk(ast.parse(text)) if isinstance(node, kinds)
                   and set(range(node.lineno, node.end_lineno + 1)) <= wanted), key=lambda node: node.lineno)


def _lines_replaced(text: str, node: ast.stmt, replacement: str) -> str:
    lines = text.splitlines(keepends=True)
    indent = lines[node.lineno - 1][:node.col_offset]
    lines[node.lineno - 1:node.end_lineno] = [f"{indent}{replacement}\n"]
    return "".join(lines)


SIMPLE_STATEMENTS = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr, ast.Return, ast.Raise, ast.Delete)


def _delete_statement(text: str, lines: list[int]):
    for node in _statements(text, lines, SIMPLE_STATEMENTS):
        return _lines_replaced(text, node, "pass"), node.lineno, f"the statement on line {node.lineno} deleted"
    return None


def _swallow_exception(text: str, lines: list[int]):
    for node in _statements(text, lines, (ast.Raise,)):
        return _lines_replaced(text, node, "pass"), node.lineno, f"the exception raised on line {node.lineno} " \
                                                                 "swallowed"
    for node in _statements(text, lines, SIMPLE_STATEMENTS[:5]):
        source = "".join(text.splitlines(keepends=True)[node.lineno - 1:node.end_lineno])
        if node.lineno != node.end_lineno:
            continue
        statement = source.strip()
        wrapped = f"try:\n{' ' * (node.col_offset + 4)}{statement}\n{' ' * node.col_offset}except Exception:\n" \
                  f"{' ' * (node.col_offset + 4)}pass"
        return (_lines_replaced(text, node, wrapped), node.lineno,
                f"line {node.lineno} wrapped in a try that swallows every exception")
    return None


def _hard_code_return(text: str, lines: list[int]):
    for node in _statements(text, lines, (ast.Return,)):
        if node.value is None or isinstance(node.value, ast.Constant) and node.value.value is None:
            continue
        return _lines_replaced(text, node, "return None"), node.lineno, \
            f"the value returned on line {node.lineno} hard-coded to None"
    return None


def _revert_one_hunk(gold_patch: str) -> Optional[Mutant]:
    """The gold patch without its last hunk, where it has more than one (in Python files)."""
    try:
        files = PatchSet(gold_patch)
    except UnidiffParseError:
        return None
    hunks = [(patched, hunk) for patched in files if patched.path.endswith(".py") for hunk in patched]
    if len(hunks) < 2:
        return None
    dropped_file, dropped = hunks[-1]
    parts = []
    for patched in files:
        kept = [hunk for hunk in patched if hunk is not dropped]
        if not kept:
            continue
        header = str(patched).split("\n@@", 1)[0] if "\n@@" in str(patched) else str(patched).rstrip("\n")
        parts.append(header.rstrip("\n") + "\n" + "".join(str(hunk) for hunk in kept))
    return Mutant("reverted_hunk", "".join(parts), {
        "file": dropped_file.path, "line": dropped.target_start,
        "description": f"the hunk at line {dropped.target_start} of {dropped_file.path} reverted"})
