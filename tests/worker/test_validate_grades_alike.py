"""Validation's sides are grades: a gold patch whose changes grading puts back validates as it grades."""

from datetime import datetime, timezone
from pathlib import Path

import pytest

from tests.gitrepo import GitRepo
from worker.engine.env.builder import EnvironmentBuilder
from worker.engine.git.patches import commit_patches
from worker.engine.grade.candidate import TaskToGrade, candidate_grade
from worker.engine.test_files import TestFileRules
from worker.engine.validate.pipeline import CommitToValidate, ValidationSettings, task_validate

UV = Path(__file__).resolve().parents[2] / ".venv" / "bin" / "uv"
PYPROJECT = '[project]\nname = "pkg"\nversion = "0"\n[project.optional-dependencies]\ntest = ["pytest"]\n'
CORE_TEST = "from pkg.core import double\n\n\ndef test_fixed():\n    assert double(3) == 6\n"
# Collected only where pytest is told functions named check_* are tests: the fix says so in the pytest
# section of its configuration, a change grading puts back (a candidate may not change how pytest runs).
CHECK_TEST = ("from pkg.core import double\n\n\ndef check_doubles():\n    assert double(3) == 6\n\n\n"
              "def test_doubles_two():\n    assert double(2) == 4\n")
CONFIGS = {
    "tox.ini": ("[pytest]\naddopts = -ra\n", "[pytest]\naddopts = -ra\npython_functions = test_* check_*\n"),
    "pyproject.toml": (PYPROJECT + '[tool.pytest.ini_options]\naddopts = "-ra"\n',
                       PYPROJECT + '[tool.pytest.ini_options]\naddopts = "-ra"\n'
                                   'python_functions = ["test_*", "check_*"]\n'),
}


@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_a_gold_patch_that_edits_the_pytest_section_validates_as_it_grades(config, open_folder):
    repo = GitRepo(open_folder / "repo")
    before_config, after_config = CONFIGS[config]
    parent = repo.commit("init", {
        "pyproject.toml": PYPROJECT, **{config: before_config}, "pkg/__init__.py": "",
        "pkg/core.py": "def double(x):\n    return x + x if x != 3 else 7\n",
        "tests/test_other.py": "def test_other():\n    assert True\n",
    })
    fix = repo.commit("Fix double(3)", {"pkg/core.py": "def double(x):\n    return x + x\n", config: after_config,
                                        "tests/test_core.py": CORE_TEST, "tests/test_checks.py": CHECK_TEST})
    builder = EnvironmentBuilder(env_root=open_folder / "envs", uv=UV)
    result = task_validate(CommitToValidate(mirror_dir=repo.path, sha=fix, parent_sha=parent,
                                            committed_at=datetime(2026, 6, 1, tzinfo=timezone.utc)),
                           builder=builder, work_root=open_folder, settings=ValidationSettings(reruns=1))
    # The check is no test once the configuration is put back: it is no F2P test.
    assert (result.verdict, result.oracle.fail_to_pass) == ("valid", ["tests/test_core.py::test_fixed"]), result.reason
    assert result.gold.tampering == [config] and result.gold.outcome == "resolved"
    assert result.empty.outcome == "no"

    patches = commit_patches(repo.path, fix, parent, TestFileRules())
    task = TaskToGrade(mirror_dir=repo.path, base_sha=parent, test_patch=patches.test_patch,
                       fail_to_pass=tuple(result.oracle.fail_to_pass), pass_to_pass=tuple(result.oracle.pass_to_pass))
    graded = candidate_grade(task, patches.source_patch, builder=builder, environment=result.environment,
                             work_root=open_folder)
    assert (graded.outcome, graded.tampering) == ("resolved", [config])
    assert candidate_grade(task, "", builder=builder, environment=result.environment,
                           work_root=open_folder).outcome == "no"


def _validated(repo, builder, place, sha, parent, reusable=()):
    return task_validate(CommitToValidate(mirror_dir=repo.path, sha=sha, parent_sha=parent,
                                          committed_at=datetime(2026, 6, 1, tzinfo=timezone.utc)),
                         builder=builder, work_root=place, settings=ValidationSettings(reruns=0),
                         reusable=reusable)


def test_an_environment_is_reused_on_the_strength_of_the_gold_patchs_run_or_else_a_check_of_its_own(open_folder):
    repo = GitRepo(open_folder / "repo")
    pyproject = PYPROJECT + '[tool.pytest.ini_options]\ntestpaths = ["tests"]\n'
    first_parent = repo.commit("init", {"pyproject.toml": pyproject, "pkg/__init__.py": "",
                                        "pkg/core.py": "def double(x):\n    return x + x if x != 3 else 7\n",
                                        "tests/test_other.py": "def test_other():\n    assert True\n"})
    first = repo.commit("Fix double(3)", {"pkg/core.py": "def double(x):\n    return x + x if x != 4 else 9\n",
                                          "tests/test_core.py": CORE_TEST})
    # A test outside testpaths: the suite's run does not reach it, so its collection is checked alone.
    outside = repo.commit("Fix double(4)", {"pkg/core.py": "def double(x):\n    return x + x\n",
                                            "extra/test_four.py": "from pkg.core import double\n\n\n"
                                                                  "def test_four():\n    assert double(4) == 8\n"})
    # A test no environment of this recipe collects: the reuse is refused, and so is a build.
    missing = repo.commit("Use a package nobody installed", {
        "tests/test_missing.py": "import package_nobody_installed\n\n\ndef test_it():\n    assert True\n"})
    builder = EnvironmentBuilder(env_root=open_folder / "envs", uv=UV)
    built = _validated(repo, builder, open_folder, first, first_parent)
    assert built.verdict == "valid" and not built.environment_reused
    assert "reuse" not in [attempt.strategy for attempt in built.attempts]

    again = _validated(repo, builder, open_folder, first, first_parent, reusable=[built.environment])
    assert again.environment_reused and [(a.strategy, a.status) for a in again.attempts] == [("reuse", "ok")]
    assert again.attempts[0].commands[0].startswith("the gold patch's run")  # no collection of its own
    assert [(r.side, r.scope) for r in again.runs] == [("before", "suite"), ("after", "suite")]
    assert again.oracle == built.oracle

    checked = _validated(repo, builder, open_folder, outside, first, reusable=[built.environment])
    assert checked.environment_reused and "--collect-only" in checked.attempts[0].commands[0]
    assert (checked.verdict, checked.oracle.fail_to_pass) == ("valid", ["extra/test_four.py::test_four"])
    assert ("after", "selected") in [(r.side, r.scope) for r in checked.runs] and checked.gold is None

    refused = _validated(repo, builder, open_folder, missing, outside, reusable=[built.environment])
    assert refused.verdict == "environment_failed" and not refused.environment_reused and not refused.runs
    assert (refused.attempts[0].strategy, refused.attempts[0].status) == ("reuse", "failed")
