"""Regression tests for the execution verifier: test files at the base commit near the code the
candidates touch, most related first. The runner then keeps the tests that pass at the base commit,
within its time budget.

A test file is related to a touched module, in this order:
1. it imports the module (`import pkg.mod`, `from pkg.mod import x`, `from pkg import mod`);
2. its name is the module's (`test_mod.py`, `mod_test.py`);
3. it imports the module's package;
4. it imports another module of that package (the package's own tests, as a sibling module's are).
Test files of the task's test patch are never regression tests: they are the hidden tests.
"""

import ast
from typing import Iterable

from worker.engine.mine.filters import TestFileRules

SOURCE_ROOTS = ("src/", "lib/")  # folders a package may sit in without being part of its name


def module_name(path: str) -> str:
    """`textkit/slug.py` -> `textkit.slug`; `src/pkg/__init__.py` -> `pkg`."""
    for root in SOURCE_ROOTS:
        if path.startswith(root):
            path = path[len(root):]
            break
    parts = path[:-3].split("/") if path.endswith(".py") else path.split("/")
    if parts and parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def imported_modules(source: str) -> set[str]:
    """Every module a file imports, with each `from pkg import name` also as `pkg.name`."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return set()
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names if alias.name != "*"}
    return found


def regression_test_files(files: dict[str, str], touched: Iterable[str], *, hidden: Iterable[str] = (),
                          rules: TestFileRules = TestFileRules()) -> list[str]:
    """The test files among `files` (path -> text at the base commit) related to the touched source
    files, most related first (then by path); none of `hidden`."""
    modules = {module_name(path) for path in touched if path.endswith(".py") and rules.kind(path) == "source"}
    modules.discard("")
    packages = {module.rsplit(".", 1)[0] for module in modules if "." in module}
    stems = {module.rsplit(".", 1)[-1] for module in modules}
    hidden = set(hidden)
    ranked = []
    for path, text in files.items():
        name = path.rsplit("/", 1)[-1][:-3]
        collected = name.startswith("test_") or name.endswith("_test")  # what pytest collects by default
        if path in hidden or not path.endswith(".py") or not collected or not rules.is_test(path):
            continue
        imports = imported_modules(text)
        if imports & modules:
            rank = 0
        elif name.removeprefix("test_").removesuffix("_test") in stems:
            rank = 1
        elif imports & packages:
            rank = 2
        elif any(imported.startswith(f"{package}.") for imported in imports for package in packages):
            rank = 3
        else:
            continue
        ranked.append((rank, path))
    return [path for _, path in sorted(ranked)]
