"""Regression tests for the execution verifier: test files at the base commit that exercise the code
the candidates touch, most related first, each with the reason it was chosen. The runner then keeps
the tests that pass at the base commit, within its time budget.

A test file is related to a touched module, in this order:
1. it imports the module (`import pkg.mod`, `from pkg.mod import x`, `from pkg import mod`);
2. its name is the module's (`test_mod.py`, `mod_test.py`);
3. it imports a module that imports the touched one (the package itself counts where its
   `__init__.py` imports it), at most MAX_HOPS modules away.
A test of another module of the same package is not related: it runs none of the touched code
(importing `pkg.other` runs `pkg/__init__.py`, but that is every test of the package). Test files of
the task's test patch are never regression tests: they are the hidden tests.
"""

import ast
from dataclasses import dataclass
from typing import Iterable, Optional

from worker.engine.test_files import TestFileRules

SOURCE_ROOTS = ("src/", "lib/")  # folders a package may sit in without being part of its name
# Modules in between a test and a touched module, at most. Further away, nearly every test of a large
# package reaches a touched core module, and the time budget would go to tests that hardly use it.
MAX_HOPS = 2


@dataclass(frozen=True)
class ChosenFile:
    path: str
    reason: str  # why it was chosen, in words
    rank: int  # 0 the most related


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


def imported_modules(source: str, *, path: str = "") -> set[str]:
    """Every module a file imports, with each `from pkg import name` also as `pkg.name`. Relative
    imports are resolved when the file's `path` is given."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return set()
    package = _package_of(path) if path else None
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module if not node.level else _relative(package, node.level, node.module)
            if base:
                if node.module:  # `from . import mod` names modules of the package, not the package
                    found.add(base)
                found |= {f"{base}.{alias.name}" for alias in node.names if alias.name != "*"}
    return found


def _package_of(path: str) -> list[str]:
    """The package a file's relative imports start from, as parts."""
    parts = module_name(path).split(".")
    return parts if path.endswith("__init__.py") else parts[:-1]


def _relative(package: Optional[list[str]], level: int, module: Optional[str]) -> str:
    if package is None or level - 1 > len(package):
        return ""
    base = package[:len(package) - (level - 1)]
    return ".".join([*base, *([module] if module else [])])


def regression_tests_chosen(files: dict[str, str], touched: Iterable[str], *, hidden: Iterable[str] = (),
                            rules: TestFileRules = TestFileRules()) -> list[ChosenFile]:
    """The test files among `files` (path -> text at the base commit: the test files, and the source
    files the relations go through) related to the touched source files, most related first (then by
    path), each with its reason; none of `hidden`."""
    changed = {module_name(path): path for path in touched if path.endswith(".py") and rules.kind(path) == "source"}
    changed.pop("", None)
    stems = {module.rsplit(".", 1)[-1]: path for module, path in changed.items()}
    reaching = _modules_reaching(files, set(changed), rules)
    hidden = set(hidden)
    chosen = []
    for path, text in files.items():
        name = path.rsplit("/", 1)[-1][:-3]
        collected = name.startswith("test_") or name.endswith("_test")  # what pytest collects by default
        if path in hidden or not path.endswith(".py") or not collected or not rules.is_test(path):
            continue
        imports = imported_modules(text, path=path)
        direct = sorted(imports & set(changed))
        stem = name.removeprefix("test_").removesuffix("_test")
        via = sorted((len(reaching[module]), module) for module in imports & set(reaching))
        if direct:
            chosen.append(ChosenFile(path, f"imports {direct[0]}, which the candidates change", 0))
        elif stem in stems:
            chosen.append(ChosenFile(path, f"named after {stems[stem]}, which the candidates change", 1))
        elif via:
            hops, module = via[0]
            chain = " → ".join([module, *reaching[module]])
            chosen.append(ChosenFile(path, f"imports {chain} (changed by the candidates)", 1 + hops))
    return sorted(chosen, key=lambda chosen_file: (chosen_file.rank, chosen_file.path))


def _modules_reaching(files: dict[str, str], changed: set[str], rules: TestFileRules) -> dict[str, list[str]]:
    """{module: the modules it goes through to a changed one, the changed one last} for the source
    modules that import a changed module, at most MAX_HOPS away (the nearest way)."""
    imports = {module_name(path): imported_modules(text, path=path) for path, text in files.items()
               if path.endswith(".py") and rules.kind(path) == "source"}
    reaching: dict[str, list[str]] = {}
    frontier = set(changed)
    for _ in range(MAX_HOPS):
        found = {}
        for module, its_imports in sorted(imports.items()):
            if module in reaching or module in changed:
                continue
            target = min((name for name in its_imports if name in frontier), default=None)
            if target is not None:
                found[module] = [target] if target in changed else [target, *reaching[target]]
        reaching.update(found)
        frontier = set(found)
    return reaching


def regression_test_files(files: dict[str, str], touched: Iterable[str], *, hidden: Iterable[str] = (),
                          rules: TestFileRules = TestFileRules()) -> list[str]:
    """The chosen test files' paths, most related first (regression_tests_chosen)."""
    return [chosen.path for chosen in regression_tests_chosen(files, touched, hidden=hidden, rules=rules)]
