"""How a repository installs: the files that say so (its recipe), the strategies to try, and
where the working copy and the environment sit inside the sandbox.

Inside the sandbox the working copy is always at /workspace/repo and the virtualenv at
/workspace/env: editable installs point there, so an environment built for one commit can
serve another with the same dependencies.
"""

import ast
import configparser
import hashlib
import os
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from packaging.markers import InvalidMarker, Marker
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name

from worker.engine.sandbox.base import sandbox_file_read

WORKSPACE = "/workspace"
REPO = f"{WORKSPACE}/repo"
ENV = f"{WORKSPACE}/env"
UV = "/opt/commitgym/uv"
# A .pth file, named to be read last (no other .pth file's import line then finds a module of the
# working copy's), putting the working copy's src/ ahead of site-packages: the code under test is the
# working copy's even where a regular install put a copy in site-packages (the runner puts the working
# copy's root first itself).
WORKING_COPY_PTH = "zz_commitgym_working_copy.pth"


def working_copy_pth_line(repo: str) -> str:
    return ("import sys; sys.path.insert(next((i for i, p in enumerate(sys.path) if p.endswith('-packages')), "
            f"len(sys.path)), {repo + '/src'!r})\n")
TEST_EXTRAS = ("test", "tests", "testing", "dev")
_INSTALL_FILES = ("pyproject.toml", "setup.cfg", "setup.py", "tox.ini", "Pipfile")
# Build backends and their plugins: what building a package needs, not what its code runs with.
BUILD_PACKAGES = (
    "setuptools", "wheel", "setuptools-scm", "hatchling", "hatch-vcs", "hatch-fancy-pypi-readme", "editables",
    "trove-classifiers", "flit-core", "flit-scm", "poetry-core", "poetry-dynamic-versioning", "pdm-backend",
    "pdm-pep517", "setuptools-rust", "scikit-build-core", "meson-python", "maturin", "pbr", "incremental", "calver",
)


@dataclass(frozen=True)
class Strategy:
    name: str
    install_args: tuple[str, ...]  # given to `uv pip install`, pytest is added
    # A .pth file in the environment puts the working copy (and its src/) on sys.path: the code under
    # test is imported from the working copy without being installed.
    working_copy_on_path: bool = False


def install_recipe(repo_dir: Path) -> dict[str, str]:
    """The files that say how the repository installs, by path."""
    paths = [repo_dir / name for name in _INSTALL_FILES]
    # requirements.txt, requirements-dev.txt, and the dev-requirements.txt or test-requirements.txt of old.
    paths += sorted(repo_dir.glob("*requirements*.txt")) + sorted(repo_dir.glob("requirements/*.txt"))
    found = {name: sandbox_file_read(repo_dir, name, max_bytes=1 << 20)
             for name in (str(path.relative_to(repo_dir)) for path in paths)}
    recipe = {name: data.decode("utf-8", "replace") for name, data in found.items() if data}
    for name in _tox_includes(recipe)[:TOX_INCLUDES]:  # what tox's deps name with -r, wherever it is
        data = sandbox_file_read(repo_dir, name, max_bytes=1 << 20) if name not in recipe else b""
        if data:
            recipe[name] = data.decode("utf-8", "replace")
    return recipe


def recipe_key(recipe: dict[str, str]) -> str:
    """Commits whose install files are the same install the same way."""
    digest = hashlib.sha256()
    for path in sorted(recipe):
        digest.update(path.encode() + b"\0" + recipe[path].encode() + b"\0")
    return digest.hexdigest()[:16]


def _declared_extras(recipe: dict[str, str]) -> list[str]:
    extras: set[str] = set()
    extras |= set(_at(_pyproject(recipe), "project", "optional-dependencies"))
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
    declared = _at(_pyproject(recipe), "project").get("requires-python")
    for name in ("setup.cfg", "setup.py"):
        match = re.search(r"""python_requires\s*[=:]\s*['"]?([^'"\n]+)""", recipe.get(name, ""))
        declared = declared or (match and match.group(1).strip())
    try:
        return SpecifierSet(declared) if isinstance(declared, str) else None
    except InvalidSpecifier:
        return None


def install_strategies(recipe: dict[str, str]) -> list[Strategy]:
    """What to try, most specific first: editable installs (PEP 660, then setuptools' compatibility
    mode, which is the legacy `develop`); a regular install; the dependencies alone, read from the
    install files; the tests alone. The last three import the code from the working copy."""
    installable = any(name in recipe for name in ("pyproject.toml", "setup.py", "setup.cfg"))
    requirements = [path for path in recipe if path.endswith(".txt")]
    test_requirements = [path for path in requirements if re.search(r"test|dev", path)]
    strategies = []
    if installable:
        strategies += [Strategy(f"editable[{extra}]", ("-e", f"{REPO}[{extra}]")) for extra in _declared_extras(recipe)]
    tox = tuple(_not_own(recipe, tox_requirements(recipe)))
    reqs = tuple(dict.fromkeys(_requirements_files(recipe, test_requirements or requirements) + tox))
    if installable and reqs:
        strategies.append(Strategy("editable+requirements", ("-e", REPO, *reqs)))
    if installable:
        strategies.append(Strategy("editable", ("-e", REPO)))
    if installable and _built_by_setuptools(recipe):
        name = project_name(recipe)
        setting = ("--config-settings-package", f"{name}:editable_mode=compat") if name else (
            "--config-settings", "editable_mode=compat")
        strategies.append(Strategy("editable-compat", ("-e", f"{REPO}[{','.join(_declared_extras(recipe))}]"
                                                       if _declared_extras(recipe) else REPO, *setting)))
    if installable:  # built as a wheel, its code imported from the working copy all the same
        strategies.append(Strategy("install", (f"{REPO}[{','.join(_declared_extras(recipe))}]"
                                               if _declared_extras(recipe) else REPO,), working_copy_on_path=True))
    dependencies = tuple(declared_dependencies(recipe))
    all_reqs = tuple(dict.fromkeys(_requirements_files(recipe, requirements) + tox))
    if dependencies or all_reqs:
        strategies.append(Strategy("dependencies", tuple(dict.fromkeys(dependencies + all_reqs)),
                                   working_copy_on_path=True))
    strategies.append(Strategy("tests-only", (), working_copy_on_path=True))
    return strategies


def _built_by_setuptools(recipe: dict[str, str]) -> bool:
    backend = _at(_pyproject(recipe), "build-system").get("build-backend", "")
    return not isinstance(backend, str) or backend.startswith("setuptools") or not backend  # with none declared, setuptools builds (PEP 517)


def _pyproject(recipe: dict[str, str]) -> dict:
    try:
        return tomllib.loads(recipe.get("pyproject.toml", ""))
    except (tomllib.TOMLDecodeError, RecursionError):
        return {}


def _at(table: dict, *keys: str) -> dict:
    """The table at `keys` in a parsed TOML document, {} where any level is missing or not a table."""
    for key in keys:
        table = table.get(key) if isinstance(table, dict) else None
    return table if isinstance(table, dict) else {}


def _setup_cfg(recipe: dict[str, str]) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(recipe.get("setup.cfg", ""))
    except configparser.Error:
        return configparser.ConfigParser(interpolation=None)
    return parser


def _setup_py_keywords(recipe: dict[str, str]) -> dict[str, object]:
    """The literal keyword arguments of the setup() call in setup.py (a name bound to a literal at
    module level counts as that literal); what is not a literal is left out."""
    try:
        module = ast.parse(recipe.get("setup.py", ""))
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return {}
    names = {}
    for node in module.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            names[node.targets[0].id] = node.value
    keywords: dict[str, object] = {}
    for node in ast.walk(module):
        if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) == "setup":
            for keyword in node.keywords:
                value = keyword.value
                if isinstance(value, ast.Name) and value.id in names:
                    value = names[value.id]
                try:
                    keywords[keyword.arg] = ast.literal_eval(value)
                except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                    pass
    return keywords


def project_name(recipe: dict[str, str]) -> str:
    """The distribution's name as the install files declare it ("" when they do not say it plainly)."""
    pyproject = _pyproject(recipe)
    name = (_at(pyproject, "project").get("name") or _at(pyproject, "tool", "poetry").get("name")
            or _setup_cfg(recipe).get("metadata", "name", fallback="") or _setup_py_keywords(recipe).get("name"))
    return name if isinstance(name, str) and re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name) else ""


def declared_dependencies(recipe: dict[str, str]) -> list[str]:
    """The runtime and test requirements the install files declare, read without running anything:
    for a package whose build fails, its dependencies can still be installed beside the working copy."""
    pyproject = _pyproject(recipe)
    found = _strings(_at(pyproject, "project").get("dependencies"))
    for extra in TEST_EXTRAS:
        found += _strings(_at(pyproject, "project", "optional-dependencies").get(extra))
    poetry = _at(pyproject, "tool", "poetry")
    for table in (_at(poetry, "dependencies"), _at(poetry, "dev-dependencies"),
                  _at(poetry, "group", "dev", "dependencies"), _at(poetry, "group", "test", "dependencies")):
        found += [name for name in table if name.lower() != "python"]  # versions as of the date, not poetry's ^
    setup_cfg = _setup_cfg(recipe)
    found += setup_cfg.get("options", "install_requires", fallback="").splitlines()
    found += setup_cfg.get("options", "tests_require", fallback="").splitlines()
    for extra in TEST_EXTRAS:
        found += setup_cfg.get("options.extras_require", extra, fallback="").splitlines()
    keywords = _setup_py_keywords(recipe)
    for key in ("install_requires", "tests_require"):
        found += _strings(keywords.get(key))
    extras = keywords.get("extras_require")
    for extra in TEST_EXTRAS:
        found += _strings(extras.get(extra)) if isinstance(extras, dict) else []
    return [text for text in _requirements(found) if canonicalize_name(Requirement(text).name) != "pytest"]


def _strings(value) -> list[str]:
    """The strings of a list as the install files give it (a setup.cfg value: one a line)."""
    if isinstance(value, str):
        return value.splitlines()
    return [item for item in value if isinstance(item, str)] if isinstance(value, (list, tuple)) else []


def declared_extras(recipe: dict[str, str]) -> dict[str, list[str]]:
    """Every extra the install files declare, with its requirements (those that parse)."""
    extras: dict[str, list] = {}
    for extra, requirements in _at(_pyproject(recipe), "project", "optional-dependencies").items():
        extras.setdefault(extra, []).extend(_strings(requirements))
    setup_cfg = _setup_cfg(recipe)
    if setup_cfg.has_section("options.extras_require"):
        for extra, text in setup_cfg.items("options.extras_require"):
            extras.setdefault(extra, []).extend(text.splitlines())
    setup_extras = _setup_py_keywords(recipe).get("extras_require")
    for extra, requirements in (setup_extras.items() if isinstance(setup_extras, dict) else []):
        extras.setdefault(str(extra), []).extend(_strings(requirements))
    return {extra: _requirements(texts) for extra, texts in extras.items()}


def requirements_file(recipe: dict[str, str], path: str, seen: frozenset = frozenset()) -> list[str]:
    """The requirements a requirements file of the recipe names, with the files it includes (`-r`)
    that the recipe holds. Options, editable and VCS or URL lines are left out: no sandbox reaches
    a VCS host, and one such line would fail the whole install (marshmallow's dev-requirements.txt
    of 2014 installs a docs theme from GitHub)."""
    texts = []
    for line in re.sub(r"\\\n", "", recipe.get(path, "")).splitlines():
        line = re.sub(r"(^|\s)#.*", "", line).strip()
        included = re.fullmatch(r"(?:-r|--requirements?)(?:\s+|=)(\S+)", line)
        if included:
            name = os.path.normpath(os.path.join(os.path.dirname(path), included.group(1)))
            if name in recipe and name not in seen:
                texts += requirements_file(recipe, name, seen | {path})
        elif line and not line.startswith("-"):
            texts.append(re.sub(r"\s--\S.*", "", line))  # per-requirement options: --hash=..., --config-settings
    return _requirements(texts)


def _requirements_files(recipe: dict[str, str], paths: list[str]) -> tuple[str, ...]:
    """The requirements of these files, each once, but the package itself (the working copy is it)."""
    return tuple(dict.fromkeys(_not_own(recipe, (text for path in paths for text in requirements_file(recipe, path)))))


def _not_own(recipe: dict[str, str], texts) -> list[str]:
    own = canonicalize_name(project_name(recipe) or "-")
    return [text for text in texts if canonicalize_name(Requirement(text).name) != own]


TOX_INCLUDES = 10  # files tox's deps include with -r, read into the recipe at most
_TOX_SUBSTITUTION = re.compile(r"\{\[([^\]{}\n]+)\]([^{}\n]+)\}")  # {[section]key}
# A line of deps that applies to some environments only: "py27: mock", "py{27,36}-django18: x", "!py27: x".
_TOX_CONDITIONAL = re.compile(r"([\w{}.!,-]+):(?!//)\s*(\S.*)")
_TOX_INCLUDE = re.compile(r"(?:-r|--requirements?)(?:\s*|=)(\S+)")
_PYTHON_FACTOR = re.compile(r"py(\d)\.?(\d*)")
_BRACES = re.compile(r"\{([^{}]*)\}")


def _tox_deps(recipe: dict[str, str]) -> list[str]:
    """The lines of tox.ini's [testenv] deps (or a pyproject.toml's legacy_tox_ini, or a setup.cfg's
    with a [tox:tox] section), its {[section]key} substitutions made and {toxinidir} read as the
    working copy's root."""
    setup_cfg = recipe.get("setup.cfg", "")
    text = recipe.get("tox.ini") or _at(_pyproject(recipe), "tool", "tox").get("legacy_tox_ini") or (
        setup_cfg if re.search(r"^\[tox:tox\]", setup_cfg, re.MULTILINE) else "")
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    try:
        parser.read_string(text if isinstance(text, str) else "")
        deps = parser.get("testenv", "deps", fallback="")
        for _ in range(5):  # substitutions that name substitutions, a few deep
            deps = _TOX_SUBSTITUTION.sub(
                lambda found: parser.get(found.group(1).strip(), found.group(2).strip(), fallback=""), deps)[:1 << 16]
    except configparser.Error:
        return []
    deps = re.sub(r"\{toxinidir\}/?", "", deps)
    return [line for line in (re.sub(r"(^|\s)#.*", "", line).strip() for line in deps.splitlines()) if line]


def _tox_included(line: str) -> Optional[str]:
    """The file a line of tox's deps includes with -r, as a path of the working copy."""
    included = _TOX_INCLUDE.fullmatch(line)
    path = os.path.normpath(included.group(1)) if included else ""
    return path if path and not path.startswith(("..", "/")) and "{" not in path else None


def _tox_includes(recipe: dict[str, str]) -> list[str]:
    lines = (_TOX_CONDITIONAL.fullmatch(line) or line for line in _tox_deps(recipe))
    paths = (_tox_included(line if isinstance(line, str) else line.group(2)) for line in lines)
    return [path for path in paths if path]


def tox_requirements(recipe: dict[str, str]) -> list[str]:
    """What tox installed for the tests, read as a requirements file: [testenv] deps and the files they
    include with -r; a line for some Pythons only ("py27: mock") gets an environment marker saying
    the same ("mock; python_version == '2.7'"). What cannot be resolved is left out: lines for other
    factors (the environment tried is a Python's own, not "django18" or "docs"), other substitutions,
    options. Nothing is run."""
    texts = []
    for line in _tox_deps(recipe):
        marker = ""
        conditional = _TOX_CONDITIONAL.fullmatch(line)
        if conditional:
            marker = _tox_condition_marker(conditional.group(1))
            if marker is None:
                continue
            line = conditional.group(2)
        included = _tox_included(line)
        if included:
            texts += [_with_marker(text, marker) for text in requirements_file(recipe, included)]
        elif "{" not in line and not line.startswith("-"):
            texts.append(_with_marker(line, marker))
    return _requirements(texts)


def _with_marker(text: str, marker: str) -> str:
    if not marker:
        return text
    try:
        requirement = Requirement(text)
        requirement.marker = Marker(f"({requirement.marker}) and ({marker})" if requirement.marker else marker)
    except (InvalidRequirement, InvalidMarker):
        return text
    return str(requirement)


def _tox_condition_marker(condition: str) -> Optional[str]:
    """A tox factor condition as an environment marker: "" where it holds on every Python, None where
    on none. Alternatives are separated by commas or expanded from braces, factors they all need by
    dashes."""
    alternatives = []
    for alternative in _braces_expanded(condition):
        factors = [_tox_factor_marker(factor) for factor in alternative.split("-") if factor]
        if None in factors or not factors:
            continue
        factors = [factor for factor in factors if factor]
        if not factors:
            return ""
        alternatives.append(" and ".join(factors))
    return " or ".join(f"({alternative})" for alternative in alternatives) if alternatives else None


def _braces_expanded(condition: str, at_most: int = 64) -> list[str]:
    """"py{27,36}-x,y" as the alternatives it stands for: py27-x, py36-x, y."""
    found = _BRACES.search(condition)
    if not found:
        return condition.split(",")
    expanded = []
    for choice in found.group(1).split(","):
        expanded += _braces_expanded(condition[:found.start()] + choice + condition[found.end():], at_most)
        if len(expanded) >= at_most:
            break
    return expanded[:at_most]


def _tox_factor_marker(factor: str) -> Optional[str]:
    """A factor as an environment marker ("" on every Python, None on none): a Python's (py, py3,
    py27, py3.10, and their negations by "!"); any other is not the environment tried, its negation is."""
    negated, factor = factor.startswith("!"), factor[1:] if factor.startswith("!") else factor
    python = _PYTHON_FACTOR.fullmatch(factor)
    if factor == "py":
        markers = ("", None)
    elif python and python.group(2):
        version = ".".join(python.groups())
        markers = (f'python_version == "{version}"', f'python_version != "{version}"')
    elif python:
        major = int(python.group(1))
        markers = (f'python_version >= "{major}" and python_version < "{major + 1}"',
                   f'python_version < "{major}" or python_version >= "{major + 1}"')
    else:  # pypy, jython, django18, docs, ...
        markers = (None, "")
    return markers[negated]


def _requirements(texts) -> list[str]:
    """The texts that are requirements of a package by name (not a direct URL), each once."""
    found = []
    for text in texts:
        try:
            requirement = Requirement(text.split("#")[0].strip())
        except (InvalidRequirement, TypeError, AttributeError):
            continue
        if not requirement.url and str(requirement) not in found:
            found.append(str(requirement))
    return found


def pytest_plugins(recipe: dict[str, str]) -> list[str]:
    """The pytest plugins (pytest-*) the install files and requirements files name: they go with the
    pytest an attempt installs, not with the commit's date (pytest-xdist of 2014 fails to load in
    pytest 6)."""
    texts = declared_dependencies(recipe) + [text for requirements in declared_extras(recipe).values()
                                             for text in requirements]
    texts += [text for path in recipe if path.endswith(".txt") for text in requirements_file(recipe, path)]
    texts += tox_requirements(recipe)
    names = (canonicalize_name(Requirement(text).name) for text in texts)
    return sorted({name for name in names if name.startswith("pytest-")})


def build_packages(recipe: dict[str, str]) -> list[str]:
    """What building this package needs (the known backends, and its [build-system] requirements that
    its code does not also import at run time): resolved apart from the commit's date."""
    names = {canonicalize_name(name) for name in BUILD_PACKAGES}
    runtime = {canonicalize_name(Requirement(text).name) for text in declared_dependencies(recipe)}
    for text in _strings(_at(_pyproject(recipe), "build-system").get("requires")):
        try:
            name = canonicalize_name(Requirement(text).name)
        except (InvalidRequirement, TypeError):
            continue
        if name not in runtime and name != "pytest":
            names.add(name)
    return sorted(names)
