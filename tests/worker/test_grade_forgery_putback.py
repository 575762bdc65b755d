"""Hostile candidates against what grading puts back, on a task of the sample repository, graded for
real in both sandboxes (worker/engine/grade/candidate.py): compiled files, package metadata in any
case, a pytest section hidden from a reader of lines, and trees nested thousands of folders deep.
None of them fixes the bug; none grades resolved."""

import itertools
import shutil
import subprocess
from datetime import datetime, timezone

import pytest

from tests.gitrepo import GitRepo
from tests.worker.test_validate import UV
from worker.demo.sample_repo import sample_repo_write
from worker.engine.env.builder import EnvironmentBuilder
from worker.engine.git.patches import commit_patches
from worker.engine.grade.candidate import GradeResult, TaskToGrade, candidate_grade
from worker.engine.grade.second_opinion import second_opinion
from worker.engine.sandbox import disk
from worker.engine.test_files import TestFileRules
from worker.engine.validate.pipeline import CommitToValidate, ValidationSettings, task_validate

F2P = "tests/test_slug.py::test_slugify_strips_accents"
# A plugin that collects every test as a stub that passes: anything that loads it forges a pass.
STUB_PLUGIN = '''import pytest


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makeitem(collector, name, obj):
    if name.startswith("test_") and callable(obj):
        return [pytest.Function.from_parent(collector, name=name, callobj=lambda: None)]
'''
PLUGIN_ENTRY_POINT = "[pytest11]\ntextkit_compat = textkit._compat\n"
# The bases the attacks on setup.cfg and tox.ini need: pytest's configuration in one of them
# (pyproject.toml's, which pytest would read first, taken out).
SETUP_CFG = "[metadata]\nname = textkit\n\n[tool:pytest]\ntestpaths = tests\npythonpath = .\n"
TOX_INI = ("[tox]\nenvlist = py\n\n[testenv]\ndeps = pytest\ncommands = pytest\n\n"
           "[pytest]\ntestpaths = tests\npythonpath = .\n")
# Made as the tests import the package: trees nested 5,000 folders deep in the run's copy and in the
# folder beside it where the report plugin (or the plain runner) lives.
DEEP_AT_IMPORT = '''
import glob as _glob
import os as _os

_top = _os.open(".", _os.O_RDONLY)
for _folder in [".", *_glob.glob("../commitgym-*")]:
    _os.chdir(_folder)
    for _ in range(5000):
        _os.mkdir("deep")
        _os.chdir("deep")
    _os.fchdir(_top)
_os.close(_top)
'''

_SIDES = itertools.count()


@pytest.fixture(scope="module", params=["local", "docker"])
def textkit(request, open_module_folder, docker_builder_make):
    """The sample repository's first fix with a test (slugify drops accented letters), validated in
    the sandbox, and a way to grade a patch against its hidden tests."""
    place = open_module_folder / request.param
    builder = docker_builder_make(place / "envs") if request.param == "docker" else EnvironmentBuilder(
        env_root=place / "envs", uv=UV)
    commits = sample_repo_write(place / "textkit")
    fix = next(commit for commit in commits if commit.kind == "fix_with_test")
    parent = commits[commits.index(fix) - 1].sha
    result = task_validate(CommitToValidate(mirror_dir=place / "textkit", sha=fix.sha, parent_sha=parent,
                                            committed_at=datetime(2026, 6, 1, tzinfo=timezone.utc)),
                           builder=builder, work_root=place, settings=ValidationSettings(reruns=0))
    assert result.verdict == "valid" and result.oracle.fail_to_pass == [F2P], result.reason
    patches = commit_patches(place / "textkit", fix.sha, parent, TestFileRules())
    task = TaskToGrade(mirror_dir=place / "textkit", base_sha=parent, test_patch=patches.test_patch,
                       fail_to_pass=tuple(result.oracle.fail_to_pass), pass_to_pass=tuple(result.oracle.pass_to_pass))

    def grade(patch, **changes):
        return candidate_grade(TaskToGrade(**{**task.__dict__, **changes}), patch, builder=builder,
                               environment=result.environment, work_root=place)

    grade.repo, grade.parent, grade.fix, grade.gold = GitRepo(place / "textkit"), parent, fix.sha, patches.source_patch
    grade.python = ".".join(result.environment.python_version.split(".")[:2])
    grade.task, grade.builder, grade.environment, grade.place = task, builder, result.environment, place
    return grade


def test_the_gold_patch_resolves_and_the_empty_one_does_not(textkit):
    gold = textkit(textkit.gold)
    assert (gold.outcome, gold.tampering, gold.touches_tests) == ("resolved", [], [])
    assert textkit("").outcome == "no"


def compiled(source: str, version: str, folder) -> tuple[str, bytes]:
    """`source` compiled by the environment's Python into bytecode it loads without looking at the
    source file (an unchecked hash), and where that Python caches textkit/slug.py's bytecode."""
    python = shutil.which(f"python{version}") or pytest.fail(f"no python{version} here to compile with")
    (folder / "slug.py").write_text(source)
    done = subprocess.run([python, "-c", (
        "import importlib.util, py_compile, sys\n"
        "py_compile.compile(sys.argv[1], cfile=sys.argv[2], invalidation_mode="
        "py_compile.PycInvalidationMode.UNCHECKED_HASH)\n"
        "print(importlib.util.cache_from_source('textkit/slug.py'))\n"),
        str(folder / "slug.py"), str(folder / "slug.pyc")], capture_output=True, text=True, check=True)
    return done.stdout.strip(), (folder / "slug.pyc").read_bytes()


def test_compiled_files_a_candidate_adds_are_put_back(textkit, tmp_path):
    # The fix, compiled: Python loads the cached bytecode in place of textkit/slug.py, which still has
    # the bug, and the patch shows nothing but a binary file.
    fixed = textkit.repo.git("show", f"{textkit.fix}:textkit/slug.py") + "\n"
    cache, bytecode = compiled(fixed, textkit.python, tmp_path)
    others = {"textkit/accents.pyc": bytecode, "textkit/_speedups.cpython-311-x86_64-linux-gnu.so": b"\x7fELF",
              "textkit/_speedups.abi3.so": b"\x7fELF", "textkit/_win.PYD": b"MZ", "textkit/old.pyo": bytecode,
              "tests/__pycache__/test_slug.cpython-311-pytest-9.2.0.pyc": bytecode}
    hidden = textkit(diff(textkit.repo, textkit.parent, {cache: bytecode, **others}))
    assert (hidden.outcome, hidden.tampering) == ("no", sorted([cache, *others])), hidden.detail


@pytest.mark.parametrize("folder, metadata", [("Evil.Dist-Info", "METADATA"), ("Evil.EGG-INFO", "PKG-INFO")])
def test_package_metadata_declaring_a_plugin_is_put_back_in_any_case(textkit, folder, metadata):
    # importlib.metadata finds a distribution by its folder's name in lower case: pytest loads the plugin.
    declared = textkit(diff(textkit.repo, textkit.parent, {
        "textkit/_compat.py": STUB_PLUGIN, f"{folder}/entry_points.txt": PLUGIN_ENTRY_POINT,
        f"{folder}/{metadata}": "Metadata-Version: 2.1\nName: evil\nVersion: 1.0\n"}))
    assert (declared.outcome, declared.tampering) == (
        "no", [f"{folder}/{metadata}", f"{folder}/entry_points.txt"]), declared.detail


@pytest.mark.parametrize("name, text, elsewhere", [
    ("setup.cfg", SETUP_CFG, ("name = textkit", "name = tk")),
    ("tox.ini", TOX_INI, ("deps = pytest", "deps =\n    pytest\n    hypothesis")),
], ids=["setup.cfg", "tox.ini"])
def test_a_pytest_option_hidden_on_a_continuation_line_is_put_back(textkit, name, text, elsewhere):
    # A base whose pytest configuration is this file's.
    pyproject = textkit.repo.git("show", f"{textkit.parent}:pyproject.toml") + "\n"
    base = diff_commit(textkit.repo, textkit.parent, {
        name: text, "pyproject.toml": pyproject.split("[tool.pytest.ini_options]")[0]})
    gold = textkit(textkit.gold, base_sha=base)
    assert (gold.outcome, gold.tampering) == ("resolved", [])
    # pytest reads `pythonpath` on to the indented line, then `addopts`: a reader of lines sees the
    # section end at the indented header.
    hidden = textkit(diff(textkit.repo, base, {
        "textkit/_compat.py": STUB_PLUGIN, name: text + "    [x]\naddopts = -p textkit._compat\n"}), base_sha=base)
    assert (hidden.outcome, hidden.tampering) == ("no", [name]), hidden.detail
    # Elsewhere in the file a fix may change what it likes.
    changed = textkit(diff(textkit.repo, base, {name: text.replace(*elsewhere)}) + textkit.gold, base_sha=base)
    assert (changed.outcome, changed.tampering) == ("resolved", [])


def diff_commit(repo: GitRepo, parent: str, files: dict) -> str:
    """A commit of `files` on top of `parent`, on a branch of its own (files git would ignore too)."""
    repo.git("checkout", "-q", "-b", f"side-{next(_SIDES)}", parent)
    for name, content in files.items():
        (repo.path / name).parent.mkdir(parents=True, exist_ok=True)
        (repo.path / name).write_bytes(content.encode() if isinstance(content, str) else content)
    repo.git("add", "-f", "--", *files)
    repo.git("commit", "-q", "-m", "side")
    sha = repo.git("rev-parse", "HEAD")
    repo.git("checkout", "-q", "-")
    return sha


def diff(repo: GitRepo, parent: str, files: dict) -> str:
    """The patch that turns `parent` into `parent` with `files`."""
    side = diff_commit(repo, parent, files)  # git's own output whole: a binary hunk ends with a blank line
    return subprocess.run(["git", "diff", "--binary", parent, side], cwd=repo.path, capture_output=True, text=True,
                          check=True).stdout


def deep_file(depth: int, folder: str = "d") -> str:
    path = "/".join([folder] * depth) + "/deep.py"
    return f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n@@ -0,0 +1 @@\n+x = 1\n"


def test_a_candidate_nesting_folders_thousands_deep_gets_a_verdict(textkit):
    # As deep as git can write (a path under 4,096 bytes): an error, with why.
    deep = textkit(deep_file(2000))
    assert deep.outcome == "error" and "folders nested more than 256 deep" in deep.detail, deep.detail
    # The same on a candidate that must be applied to the base alone (it edits a line the test patch
    # changes): its copy is a plain folder of the grade's, copied for each run.
    test_slug = textkit.repo.git("show", f"{textkit.parent}:tests/test_slug.py") + "\n"
    conflict = diff(textkit.repo, textkit.parent, {
        "tests/test_slug.py": test_slug.replace("def test_slugify_max_length", "def test_edited")})
    conflicting = textkit(deep_file(2000) + conflict)
    assert conflicting.outcome == "error" and "nested more than 256 deep" in conflicting.detail, conflicting.detail
    # As deep as grading walks, both ways: graded.
    assert (textkit(deep_file(256)).outcome, textkit(deep_file(256) + conflict).outcome) == ("no", "no")
    # Shallow, but with a path of 3,521 bytes: the worker's absolute paths into copies would come near
    # PATH_MAX, where a walk by paths skips what is below (os.walk) or fails (copytree).
    for long in (textkit(deep_file(14, "f" * 250)), textkit(deep_file(14, "f" * 250) + conflict)):
        assert long.outcome == "error" and "a path longer than 2048 bytes" in long.detail, long.detail
    # Deeper than any path: git cannot write it.
    assert textkit(deep_file(5000)).outcome == "does_not_apply"


@pytest.mark.parametrize("capped", [True, False], ids=["capped", "plain-folder"])
def test_a_tree_5000_folders_deep_made_by_the_tests_gets_a_verdict(textkit, monkeypatch, capped):
    # Where the run's copy is a plain folder (a worker without root), the worker walks it and removes it;
    # a capped folder is unmounted, but the plugin's folder is removed before.
    if not capped:
        monkeypatch.setattr(disk, "capped_folders_available", lambda: False)
    init = textkit.repo.git("show", f"{textkit.parent}:textkit/__init__.py") + "\n"
    deep = textkit(diff(textkit.repo, textkit.parent, {"textkit/__init__.py": init + DEEP_AT_IMPORT}))
    assert deep.outcome in ({"no"} if capped else {"no", "error"}), deep.detail
    assert deep.tampering == []


def test_a_second_opinion_on_a_candidate_making_a_tree_5000_folders_deep_is_had(textkit):
    init = textkit.repo.git("show", f"{textkit.parent}:textkit/__init__.py") + "\n"
    patch = diff(textkit.repo, textkit.parent, {"textkit/__init__.py": init + DEEP_AT_IMPORT})
    opinion = second_opinion(textkit.task, patch, GradeResult("no"), builder=textkit.builder,
                             environment=textkit.environment, work_root=textkit.place)
    assert (opinion.outcomes, opinion.detail) == ({F2P: "FAILED"}, "")
