"""The era repository: eralib packaged in the style of each era from 2013 to 2026, a real bug fixed in each.

Plain pytest: no Django, no database, no network. Nothing is installed: the eralib
checkouts' tests run with this interpreter (sys.executable), the library importable
through PYTHONPATH (the checkout, or its src/), a stub six where six is missing, and
a stub of the version file that setuptools-scm would write at build time.
"""

from __future__ import annotations

import ast
import configparser
import importlib.util
import os
import re
import subprocess
import sys
import tomllib
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path

import pytest

from worker.demo.era_repo import ERA_STYLES, EraCommit, era_repo_write
from worker.engine.git.repo import BlobReader
from worker.engine.mine.filters import MiningFilters, drop_reason
from worker.engine.mine.walk import commits_walk, python_changes_checked
from worker.engine.test_files import TestFileRules

PROJECT_ROOT = Path(__file__).resolve().parents[2]
PACKAGING_FILES = {"setup.py", "setup.cfg", "requirements.txt", "pyproject.toml", "Pipfile", "tox.ini"}
EXPECTED_PACKAGING = {
    "distutils": {"setup.py"},
    "setup_cfg": {"setup.py", "setup.cfg"},
    "requirements_txt": {"requirements.txt"},
    "setuptools_pyproject": {"pyproject.toml", "setup.cfg", "setup.py"},
    "flit": {"pyproject.toml"},
    "poetry_core": {"pyproject.toml"},
    "hatch_vcs": {"pyproject.toml"},
    "scm_version_file": {"pyproject.toml"},
}
VERSION_FILE = "src/eralib/_version.py"
VERSION_STUB = 'version = __version__ = "0.0.0"\nversion_tuple = __version_tuple__ = (0, 0, 0)\n'


# ---------------------------------------------------------------- helpers


def git(repo: Path, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_CONFIG_GLOBAL=os.devnull, GIT_CONFIG_NOSYSTEM="1")
    result = subprocess.run(["git", "-c", "core.quotepath=false", *args], cwd=repo, env=env, capture_output=True,
                            check=False)
    assert result.returncode == 0, f"git {args} failed: {result.stderr.decode(errors='replace')}"
    return result.stdout.decode("utf-8")


def tree(repo: Path, sha: str) -> set[str]:
    return set(git(repo, "ls-tree", "-r", "--name-only", sha).split("\n")) - {""}


def show(repo: Path, sha: str, path: str) -> str:
    return git(repo, "show", f"{sha}:{path}")


def toml_at(repo: Path, sha: str) -> dict:
    return tomllib.loads(show(repo, sha, "pyproject.toml"))


def cfg_at(repo: Path, sha: str) -> configparser.ConfigParser:
    parser = configparser.ConfigParser()
    parser.read_string(show(repo, sha, "setup.cfg"))
    return parser


def checkout(repo: Path, sha: str, where: Path) -> Path:
    """The commit's files (no .git), as `git archive SHA | tar -x` gives them."""
    where.mkdir(parents=True)
    archive = subprocess.run(["git", "archive", sha], cwd=repo, capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(where)], input=archive, check=True)
    return where


def changed_test_files(repo: Path, sha: str) -> list[str]:
    names = git(repo, "diff-tree", "--no-commit-id", "--no-renames", "--name-only", "-r", sha).split("\n")
    return [name for name in names if name and TestFileRules().is_test(name)]


_OUTCOME = re.compile(r"^(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) (\S+)", re.M)


def run_tests(work: Path, targets: list[str], six_stub: Path | None) -> tuple[int, dict[str, str], str]:
    """Run pytest on `targets` in a checkout; (exit code, node id -> outcome, output)."""
    if VERSION_FILE in (work / ".gitignore").read_text().splitlines():
        (work / VERSION_FILE).write_text(VERSION_STUB)  # what the build would write
    paths = [str(work / "src") if (work / "src").is_dir() else str(work)]
    if six_stub is not None:
        paths.append(str(six_stub))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "PYTEST_", "DJANGO_", "PYTHON"))}
    # No third-party plugins (this project's pytest-django among them): faster, and as the checkout alone says.
    env.update(PYTHONPATH=os.pathsep.join(paths), PYTHONDONTWRITEBYTECODE="1", COLUMNS="200",
               PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", *targets],
        cwd=work, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    output = result.stdout + result.stderr
    return result.returncode, {node: outcome for outcome, node in _OUTCOME.findall(result.stdout)}, output


# ---------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def era(tmp_path_factory) -> tuple[Path, list[EraCommit]]:
    repo = tmp_path_factory.mktemp("era") / "eralib"
    return repo, era_repo_write(repo)


@pytest.fixture(scope="module")
def six_stub(tmp_path_factory) -> Path | None:
    """A folder with a stand-in for six where this interpreter has none (eralib uses two names of it)."""
    if importlib.util.find_spec("six") is not None:
        return None
    folder = tmp_path_factory.mktemp("six-stub")
    (folder / "six.py").write_text("string_types = (str,)\ntext_type = str\n")
    return folder


def fixes(commits: list[EraCommit]) -> list[EraCommit]:
    return [commit for commit in commits if commit.fail_to_pass]


# ---------------------------------------------------------------- the history


def test_refuses_a_non_empty_directory(tmp_path):
    (tmp_path / "file.txt").write_text("x")
    with pytest.raises(FileExistsError):
        era_repo_write(tmp_path)


def test_history_shape(era):
    repo, commits = era
    assert len(commits) == 2 * len(ERA_STYLES) == 16
    assert [c.sha for c in commits] == git(repo, "rev-list", "--reverse", "main").split()
    assert git(repo, "symbolic-ref", "HEAD").strip() == "refs/heads/main"
    assert all(isinstance(c, EraCommit) and len(c.sha) == 40 for c in commits)
    restyles = commits[0::2]
    assert [c.style for c in restyles] == list(ERA_STYLES)
    assert not any(c.fail_to_pass for c in restyles)
    fixed = fixes(commits)
    assert fixed == commits[1::2]
    assert [c.style for c in fixed] == list(ERA_STYLES)
    assert all(node.startswith("tests/test_") and ".py::" in node for c in fixed for node in c.fail_to_pass)


def test_dates(era):
    repo, commits = era
    times = [c.committed_at for c in commits]
    assert all(t.tzinfo is not None for t in times)
    assert all(a < b for a, b in zip(times, times[1:]))
    fixed = fixes(commits)
    assert fixed[0].committed_at.year == 2013 and fixed[-1].committed_at.year == 2026
    for restyle, fix in zip(commits[0::2], commits[1::2]):
        assert timedelta(days=25) <= fix.committed_at - restyle.committed_at <= timedelta(days=40), fix.subject
    log = git(repo, "log", "--reverse", "--format=%at %ct %cI").splitlines()
    for commit, line in zip(commits, log):
        authored, committed, iso = line.split()
        assert int(authored) == int(committed) == int(commit.committed_at.timestamp())
        assert iso == commit.committed_at.isoformat()


def test_shas_do_not_depend_on_today(tmp_path, era):
    _, commits = era
    assert [c.sha for c in era_repo_write(tmp_path / "again")] == [c.sha for c in commits]


# ---------------------------------------------------------------- the packaging of each era


def test_packaging_files_of_each_era(era):
    repo, commits = era
    for commit in commits:
        assert tree(repo, commit.sha) & PACKAGING_FILES == EXPECTED_PACKAGING[commit.style], commit.subject
    by_style = {c.style: c.sha for c in fixes(commits)}

    sha = by_style["distutils"]
    assert "from distutils.core import setup" in show(repo, sha, "setup.py")
    assert "eralib/__init__.py" in tree(repo, sha)

    sha = by_style["setup_cfg"]
    setup_py = show(repo, sha, "setup.py")
    assert "from setuptools import setup" in setup_py and "distutils" not in setup_py
    cfg = cfg_at(repo, sha)
    assert cfg["metadata"]["name"] == "eralib" and "six" in cfg["options"]["install_requires"]
    assert "from six import" in show(repo, sha, "eralib/pairs.py")

    sha = by_style["requirements_txt"]
    assert show(repo, sha, "requirements.txt").split() == ["six>=1.10"]
    assert {"eralib/__init__.py", "tests/__init__.py"} <= tree(repo, sha)  # importable from the top of a checkout

    sha = by_style["setuptools_pyproject"]
    build = toml_at(repo, sha)["build-system"]
    assert build == {"requires": ["setuptools>=40.8", "wheel"], "build-backend": "setuptools.build_meta"}
    cfg = cfg_at(repo, sha)
    assert cfg["metadata"]["version"] == "attr: eralib.__version__"
    assert "six" in cfg["options"]["install_requires"] and cfg["options"]["python_requires"].startswith(">=2.7")

    sha = by_style["flit"]
    pyproject = toml_at(repo, sha)
    assert pyproject["build-system"] == {"requires": ["flit_core >=2,<4"], "build-backend": "flit_core.buildapi"}
    assert pyproject["tool"]["flit"]["metadata"]["module"] == "eralib"
    init = ast.parse(show(repo, sha, "eralib/__init__.py"))
    assert ast.get_docstring(init)  # flit takes the description from the docstring
    assert any(isinstance(node, ast.Assign) and node.targets[0].id == "__version__" for node in init.body)
    assert not any("six" in show(repo, sha, p) for p in tree(repo, sha) if p.startswith("eralib/"))

    sha = by_style["poetry_core"]
    pyproject = toml_at(repo, sha)
    assert pyproject["build-system"] == {"requires": ["poetry-core>=1.0.0"],
                                         "build-backend": "poetry.core.masonry.api"}
    assert pyproject["tool"]["poetry"]["name"] == "eralib" and "project" not in pyproject

    sha = by_style["hatch_vcs"]
    pyproject = toml_at(repo, sha)
    assert pyproject["build-system"]["build-backend"] == "hatchling.build"
    assert "hatch-vcs" in pyproject["build-system"]["requires"]
    assert pyproject["project"]["dynamic"] == ["version"] and "version" not in pyproject["project"]
    assert pyproject["tool"]["hatch"]["version"]["source"] == "vcs"
    files = tree(repo, sha)
    assert "src/eralib/__init__.py" in files and not any(f.startswith("eralib/") for f in files)

    sha = by_style["scm_version_file"]
    pyproject = toml_at(repo, sha)
    assert pyproject["build-system"]["build-backend"] == "setuptools.build_meta"
    assert any(r.startswith("setuptools-scm") for r in pyproject["build-system"]["requires"])
    assert pyproject["project"]["dynamic"] == ["version"]
    assert pyproject["tool"]["setuptools_scm"]["version_file"] == VERSION_FILE
    assert VERSION_FILE not in tree(repo, sha)
    assert VERSION_FILE in show(repo, sha, ".gitignore").splitlines()
    assert "from ._version import version as __version__" in show(repo, sha, "src/eralib/__init__.py")
    assert "import eralib" in show(repo, sha, "tests/test_version.py")


# ---------------------------------------------------------------- the bugs are real


Run = tuple[int, dict[str, str], str]  # exit code, node id -> outcome, output


@pytest.fixture(scope="module")
def runs(era, six_stub, tmp_path_factory) -> tuple[dict[str, Run], dict[str, Run]]:
    """(the whole suite at every commit, the fix's test files on its parent with them laid over it), by sha.

    Two at a time: most of a run is pytest starting."""
    repo, commits = era
    base = tmp_path_factory.mktemp("checkouts")

    def suite(numbered: tuple[int, EraCommit]) -> Run:
        number, commit = numbered
        return run_tests(checkout(repo, commit.sha, base / f"{number:02d}"), ["tests"], six_stub)

    def before(numbered: tuple[int, EraCommit]) -> Run:
        number, fix = numbered
        work = checkout(repo, commits[number - 1].sha, base / f"{number:02d}-before")
        tests = changed_test_files(repo, fix.sha)
        for path in tests:
            (work / path).write_text(show(repo, fix.sha, path))
        return run_tests(work, tests, six_stub)

    numbered = list(enumerate(commits))
    fixed = [(number, commit) for number, commit in numbered if commit.fail_to_pass]
    with ThreadPoolExecutor(max_workers=2) as pool:
        suites = dict(zip([c.sha for c in commits], pool.map(suite, numbered)))
        befores = dict(zip([c.sha for _, c in fixed], pool.map(before, fixed)))
    return suites, befores


@pytest.mark.parametrize("style", ERA_STYLES)
def test_fix_fails_before_and_passes_after(era, runs, style):
    repo, commits = era
    suites, befores = runs
    index = next(i for i, c in enumerate(commits) if c.fail_to_pass and c.style == style)
    fix, parent = commits[index], commits[index - 1]
    assert git(repo, "rev-parse", f"{fix.sha}^").strip() == parent.sha
    tests = changed_test_files(repo, fix.sha)
    assert tests and {node.split("::")[0] for node in fix.fail_to_pass} <= set(tests)

    # The parent, with the fix commit's test files laid over it: the new tests fail, and only they do.
    code, outcomes, output = befores[fix.sha]
    assert code == 1, output
    assert {node for node, outcome in outcomes.items() if outcome != "PASSED"} == set(fix.fail_to_pass), output
    assert all(outcomes[node] == "FAILED" for node in fix.fail_to_pass), output
    assert {node.split("::")[0] for node in outcomes} == set(tests), output

    # The fix commit: they pass, with the whole suite.
    code, outcomes, output = suites[fix.sha]
    assert code == 0, output
    assert set(outcomes.values()) == {"PASSED"} and set(fix.fail_to_pass) <= set(outcomes), output


def test_every_commit_is_green_and_keeps_the_earlier_tests(era, runs):
    _, commits = era
    suites, _ = runs
    seen: set[str] = set()
    for commit in commits:
        code, outcomes, output = suites[commit.sha]
        assert code == 0 and set(outcomes.values()) == {"PASSED"}, f"{commit.subject}\n{output}"
        assert seen <= set(outcomes), f"{commit.subject} lost tests: {seen - set(outcomes)}"
        seen = set(outcomes)
    assert len(seen) >= 20


# ---------------------------------------------------------------- mining


def test_fix_commits_are_kept_by_the_mining_filters(era):
    repo, commits = era
    with BlobReader(repo) as blobs:
        mined = {m.sha: m for m in python_changes_checked(commits_walk(repo, commits[-1].sha), blobs)}
    assert set(mined) == {c.sha for c in commits}
    for commit in fixes(commits):
        stats = mined[commit.sha].stats
        assert drop_reason(stats, MiningFilters()) is None, (commit.subject, stats)
        # Robust, not borderline: another way of counting must not flip the outcome.
        assert stats.non_test_file_count == 1 and stats.lines_edited <= 12 and stats.patch_chars <= 1200, stats
        assert stats.python_change and stats.tests_changed and mined[commit.sha].parent_sha
    # The restyles are too large to mine: the filters keep exactly the fix commits.
    for commit in commits:
        if not commit.fail_to_pass:
            reason = drop_reason(mined[commit.sha].stats, MiningFilters())
            assert reason in ("too_many_files", "patch_too_long"), (commit.subject, reason)


def test_command_line(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "worker.demo.era_repo", str(tmp_path / "cli")],
        cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 16
    sha, style, when, subject = lines[0].split("\t")
    assert len(sha) == 40 and style == "distutils" and when.startswith("2013-") and subject.startswith("Initial")
    assert lines[-1].split("\t")[1] == "scm_version_file"
