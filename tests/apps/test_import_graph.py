"""The layers of apps/ and worker/ hold (pyproject.toml's import-linter contracts, which `make test`
checks with `lint-imports`), a broken one is named with its chain, and imports hide inside functions
only where they must: a service dispatching a Celery task (worker/tasks.py imports the services
back), the Celery tasks themselves, and an AppConfig's ready() (models exist only once every app is
loaded)."""

import ast
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("apps", "worker")
DISPATCH = "worker.tasks"


def _modules() -> dict[str, Path]:
    """Dotted name -> file, for every module of apps/ and worker/ (migrations are Django's)."""
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _absolute(module: str, path: Path, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    for _ in range(node.level - 1):
        package = package.rsplit(".", 1)[0]
    return f"{package}.{node.module}" if node.module else package


def _imports(module: str, path: Path, modules: dict[str, Path]):
    """(imported module of ours, line, inside a function?, the function's name) for each import."""
    tree = ast.parse(path.read_text())
    functions = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for inner in ast.walk(node):
                functions.setdefault(id(inner), node.name)
    for node in ast.walk(tree):
        targets = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(module, path, node)
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names]
        for target in targets:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != module:
                yield target, node.lineno, id(node) in functions, functions.get(id(node), "")


def _lint_imports(root: Path) -> subprocess.CompletedProcess:
    """`lint-imports` run on the tree at `root` (its pyproject.toml's contracts, its packages)."""
    return subprocess.run([str(Path(sys.executable).parent / "lint-imports"), "--no-cache"], cwd=root,
                          capture_output=True, text=True, timeout=300)


def test_an_upward_import_breaks_the_layers_naming_its_chain(tmp_path):
    (tmp_path / "pyproject.toml").write_text((ROOT / "pyproject.toml").read_text())
    for package in PACKAGES:
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    models = tmp_path / "apps" / "jobs" / "models.py"
    models.write_text(models.read_text() + "\nimport apps.datasets.models  # noqa: E402,F401\n")
    result = _lint_imports(tmp_path)
    assert result.returncode != 0
    assert "apps.jobs is not allowed to import apps.datasets" in result.stdout
    assert "apps.jobs.models -> apps.datasets.models" in result.stdout


def test_imports_inside_functions_only_where_they_must_be():
    modules = _modules()
    misplaced = []
    for module, path in modules.items():
        lines = path.read_text().splitlines()
        for target, line, in_function, function in _imports(module, path, modules):
            if not in_function:
                continue
            dispatch = target == DISPATCH and "#" in lines[line - 1]  # each says why
            if dispatch or module == DISPATCH or (path.name == "apps.py" and function == "ready"):
                continue
            misplaced.append(f"{path.relative_to(ROOT)}:{line} imports {target} inside {function}()")
    assert misplaced == []


def test_no_private_name_is_imported_from_another_module():
    offenders = []
    for folder in ("apps", "worker", "bench", "tests"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").split(".")[0] in
                                                         {"apps", "worker", "tests", "bench"}):
                    offenders += [f"{path.relative_to(ROOT)}: {alias.name}" for alias in node.names
                                  if alias.name.startswith("_")]
    assert offenders == []
