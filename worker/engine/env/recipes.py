"""How a repository installs: the files that say so (its recipe), the strategies to try, and
where the working copy and the environment sit inside the sandbox.

Inside the sandbox the working copy is always at /workspace/repo and the virtualenv at
/workspace/env: editable installs point there, so an environment built for one commit can
serve another with the same dependencies.
"""

import configparser
import hashlib
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from packaging.specifiers import InvalidSpecifier, SpecifierSet

from worker.engine.sandbox.base import sandbox_file_read

WORKSPACE = "/workspace"
REPO = f"{WORKSPACE}/repo"
ENV = f"{WORKSPACE}/env"
UV = "/opt/commitgym/uv"
TEST_EXTRAS = ("test", "tests", "testing", "dev")
_INSTALL_FILES = ("pyproject.toml", "setup.cfg", "setup.py", "tox.ini", "Pipfile")


@dataclass(frozen=True)
class Strategy:
    name: str
    install_args: tuple[str, ...]  # given to `uv pip install`, pytest is added


def install_recipe(repo_dir: Path) -> dict[str, str]:
    """The files that say how the repository installs, by path."""
    paths = [repo_dir / name for name in _INSTALL_FILES]
    paths += sorted(repo_dir.glob("requirements*.txt")) + sorted(repo_dir.glob("requirements/*.txt"))
    found = {name: sandbox_file_read(repo_dir, name, max_bytes=1 << 20)
             for name in (str(path.relative_to(repo_dir)) for path in paths)}
    return {name: data.decode("utf-8", "replace") for name, data in found.items() if data}


def recipe_key(recipe: dict[str, str]) -> str:
    """Commits whose install files are the same install the same way."""
    digest = hashlib.sha256()
    for path in sorted(recipe):
        digest.update(path.encode() + b"\0" + recipe[path].encode() + b"\0")
    return digest.hexdigest()[:16]


def _declared_extras(recipe: dict[str, str]) -> list[str]:
    extras: set[str] = set()
    if "pyproject.toml" in recipe:
        try:
            project = tomllib.loads(recipe["pyproject.toml"]).get("project", {})
            extras |= set(project.get("optional-dependencies", {}))
        except tomllib.TOMLDecodeError:
            pass
    if "setup.cfg" in recipe:
        parser = configparser.ConfigParser()
        try:
            parser.read_string(recipe["setup.cfg"])
            extras |= set(parser["options.extras_require"]) if parser.has_section("options.extras_require") else set()
        except configparser.Error:
            pass
    if "setup.py" in recipe:
        extras |= set(re.findall(r"""['"](\w+)['"]\s*:\s*\[""", recipe["setup.py"]))
    return [extra for extra in TEST_EXTRAS if extra in extras]


def declared_python(recipe: dict[str, str]) -> Optional[SpecifierSet]:
    """The Pythons the repository says it supports (requires-python, python_requires), if it says."""
    declared = None
    if "pyproject.toml" in recipe:
        try:
            declared = tomllib.loads(recipe["pyproject.toml"]).get("project", {}).get("requires-python")
        except tomllib.TOMLDecodeError:
            pass
    for name in ("setup.cfg", "setup.py"):
        match = re.search(r"""python_requires\s*[=:]\s*['"]?([^'"\n]+)""", recipe.get(name, ""))
        declared = declared or (match and match.group(1).strip())
    try:
        return SpecifierSet(declared) if isinstance(declared, str) else None
    except InvalidSpecifier:
        return None


def install_strategies(recipe: dict[str, str]) -> list[Strategy]:
    """What to try, most specific first."""
    installable = any(name in recipe for name in ("pyproject.toml", "setup.py", "setup.cfg"))
    requirements = [path for path in recipe if path.endswith(".txt")]
    test_requirements = [path for path in requirements if re.search(r"test|dev", path)]
    strategies = []
    if installable:
        strategies += [Strategy(f"editable[{extra}]", ("-e", f"{REPO}[{extra}]")) for extra in _declared_extras(recipe)]
    reqs = tuple(arg for path in (test_requirements or requirements) for arg in ("-r", f"{REPO}/{path}"))
    if installable and reqs:
        strategies.append(Strategy("editable+requirements", ("-e", REPO, *reqs)))
    if installable:
        strategies.append(Strategy("editable", ("-e", REPO)))
    if reqs:
        strategies.append(Strategy("requirements", reqs))
    if not strategies:
        strategies.append(Strategy("tests-only", ()))
    return strategies
