"""The engine is plain Python: nothing under worker/engine imports Django."""

import ast
from pathlib import Path

ENGINE = Path(__file__).resolve().parents[2] / "worker" / "engine"


def test_no_module_of_the_engine_imports_django():
    offenders = []
    for path in sorted(ENGINE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            offenders += [f"{path.name}: {name}" for name in names if name.split(".")[0] in {"django", "apps"}]
    assert len(list(ENGINE.rglob("*.py"))) >= 6
    assert offenders == []


STAGES = {"git", "mine", "sandbox", "env", "run", "validate", "llm", "curate", "label", "release"}


def test_the_engine_is_a_package_per_stage_and_no_module_name_is_used_twice():
    packages = {path.parent.name for path in ENGINE.glob("*/__init__.py")}
    assert STAGES <= packages
    names = [path.stem for path in ENGINE.rglob("*.py") if path.stem != "__init__"]
    assert sorted(name for name in set(names) if names.count(name) > 1) == []
    # Outside the stages only what every stage shares: the reason codes, and which files are tests.
    assert sorted(path.name for path in ENGINE.glob("*.py")) == ["__init__.py", "reasons.py", "test_files.py"]


def test_both_sandbox_backends_have_the_protocols_run():
    import inspect

    from worker.engine.sandbox.base import Sandbox
    from worker.engine.sandbox.docker import DockerSandbox
    from worker.engine.sandbox.local import LocalSandbox

    for backend in (LocalSandbox, DockerSandbox):
        assert inspect.signature(backend.run) == inspect.signature(Sandbox.run), backend
        assert isinstance(inspect.getattr_static(backend, "isolated"), property), backend
        assert "read_only" in backend.__dataclass_fields__, backend


DESCRIPTION_COLUMN = 20  # the layout's descriptions start right of this


def test_the_readmes_layout_names_what_is_there():
    """Every file and folder the README's layout names exists where it says, but those marked next."""
    readme = (ENGINE.parents[1] / "README.md").read_text()
    tree = readme.split("## Layout", 1)[1].split("```")[1]
    parents: list[tuple[int, Path]] = []
    missing, named = [], 0
    for line in tree.splitlines():
        indent = len(line) - len(line.lstrip())
        if not line.strip() or indent >= DESCRIPTION_COLUMN:
            continue  # the description of the line above, carried on
        names = line.strip().split("  ")[0]
        parents = [(depth, path) for depth, path in parents if depth < indent]
        base = parents[-1][1] if parents else ENGINE.parents[1]
        for name in (part.strip() for part in names.split(",")):
            named += 1
            path = base / name.rstrip("/")
            if not path.exists() and "(next)" not in line:
                missing.append(str(path.relative_to(ENGINE.parents[1])))
            if name.endswith("/"):
                parents.append((indent, path))
    assert named > 30 and missing == []
