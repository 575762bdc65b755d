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
