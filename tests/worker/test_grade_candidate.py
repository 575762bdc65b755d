"""Grading candidate patches for real, in the sandbox (worker/engine/grade/candidate.py): the task's
hidden tests decide, on a clean copy, and nothing a candidate does to the tests or their
configuration counts."""

import os
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest

from tests.gitrepo import GitRepo
from tests.worker.test_validate import UV
from worker.engine.env.builder import EnvironmentBuilder
from worker.engine.git.patches import commit_patches
from worker.engine.grade.candidate import GradeSettings, TaskToGrade, candidate_grade
from worker.engine.grade.mutants import MUTANT_KINDS, mutants_make
from worker.engine.test_files import TestFileRules
from worker.engine.grade.oracle import run_outcome, runs_outcome
from worker.engine.validate.pipeline import CommitToValidate, ValidationSettings, task_validate

CALC = "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n"
FIXED = CALC.replace("a - b", "a + b")
# F2P: test_add and test_add_ones; P2P: test_add_zero and test_mul.
TESTS = ("from calc import add, mul\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\n"
         "def test_add_ones():\n    assert add(1, 1) == 2\n\n\n"
         "def test_add_zero():\n    assert add(0, 0) == 0\n\n\ndef test_mul():\n    assert mul(2, 3) == 6\n")
SETUP_CFG = "[metadata]\nname = calc\n\n[tool:pytest]\ntestpaths = tests\n"
OTHER_TESTS = "from calc import mul\n\n\ndef test_mul_squares():\n    assert mul(3, 3) == 9\n"  # P2P, no test patch


def validated(repo: GitRepo, parent: str, fix: str, builder, place):
    """The fix validated (it must be valid), its patches, and the task its candidates are graded against."""
    result = task_validate(CommitToValidate(mirror_dir=repo.path, sha=fix, parent_sha=parent,
                                            committed_at=datetime(2026, 6, 1, tzinfo=timezone.utc)),
                           builder=builder, work_root=place, settings=ValidationSettings(reruns=0))
    assert result.verdict == "valid", result.reason
    patches = commit_patches(repo.path, fix, parent, TestFileRules())
    task = TaskToGrade(mirror_dir=repo.path, base_sha=parent, test_patch=patches.test_patch,
                       fail_to_pass=tuple(result.oracle.fail_to_pass), pass_to_pass=tuple(result.oracle.pass_to_pass))
    return result, patches, task


@pytest.fixture(scope="module", params=["local", "docker"])
def graded(request, open_module_folder, docker_builder_make):
    """A validated task (its environment, oracle and patches) and a way to grade a patch against it."""
    place = open_module_folder / request.param
    builder = docker_builder_make(place / "envs") if request.param == "docker" else EnvironmentBuilder(
        env_root=place / "envs", uv=UV)
    repo = GitRepo(place / "calc")
    parent = repo.commit("init", {"calc.py": CALC, "setup.cfg": SETUP_CFG,
                                  "tests/test_calc.py": "from calc import mul\n\n\ndef test_mul():\n"
                                                        "    assert mul(2, 3) == 6\n",
                                  "tests/test_other.py": OTHER_TESTS})
    fix = repo.commit("Fix add", {"calc.py": FIXED, "tests/test_calc.py": TESTS})
    result, patches, task = validated(repo, parent, fix, builder, place)

    def grade(patch, settings=GradeSettings(), **changes):
        return candidate_grade(TaskToGrade(**{**task.__dict__, **changes}), patch, builder=builder,
                               environment=result.environment, work_root=place, settings=settings)

    grade.repo, grade.parent, grade.gold, grade.place = repo, parent, patches.source_patch, place
    return grade


def diff(repo: GitRepo, parent: str, files: dict) -> str:
    """The patch that turns the parent into `files` (a commit made on a side branch, then dropped)."""
    repo.git("checkout", "-q", "-b", f"candidate-{len(files)}-{abs(hash(str(files)))}", parent)
    sha = repo.commit("candidate", files)
    patch = repo.git("diff", "--binary", parent, sha) + "\n"  # git() strips the last newline
    repo.git("checkout", "-q", "-")
    return patch


def test_the_gold_patch_resolves_and_the_empty_one_does_not(graded):
    gold = graded(graded.gold)
    assert (gold.outcome, gold.tampering, gold.touches_tests) == ("resolved", [], [])
    assert len(gold.runs) == 1 and not gold.runs[0].untrusted
    assert graded("").outcome == "no"
    assert graded(None).outcome == "no_patch" and not graded(None).runs


def test_a_half_fix_is_partial_and_a_patch_that_does_not_apply_says_why(graded):
    # Right only when a == 2: test_add passes, test_add_ones still fails, the P2P tests pass.
    half = graded(diff(graded.repo, graded.parent, {"calc.py": CALC.replace("a - b", "5 if a == 2 else a - b")}))
    assert half.outcome == "partial"
    wrong = graded(diff(graded.repo, graded.parent, {"calc.py": CALC.replace("a - b", "a * b")}))
    assert wrong.outcome == "no"
    stale = graded("diff --git a/calc.py b/calc.py\n--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n"
                   " def add(a, b):\n-    return b - a\n+    return a + b\n")
    assert stale.outcome == "does_not_apply" and "patch does not apply" in stale.detail


def test_tampering_is_dropped_and_flagged_and_cannot_resolve(graded):
    passing_conftest = ("import pytest\n\n@pytest.hookimpl(hookwrapper=True)\n"
                        "def pytest_runtest_makereport(item, call):\n    outcome = yield\n"
                        "    outcome.get_result().outcome = 'passed'\n")
    conftest_only = graded(diff(graded.repo, graded.parent, {"conftest.py": passing_conftest}))
    assert (conftest_only.outcome, conftest_only.tampering) == ("no", ["conftest.py"])
    # On top of a wrong fix (the tampering mutant), and with the fix: the fix alone decides.
    wrong = {"calc.py": CALC.replace("a - b", "a * b"), "tests/conftest.py": passing_conftest,
             "pytest.ini": "[pytest]\naddopts = -p no:python\n", "calc_boot.pth": "import os\n"}
    tampered = graded(diff(graded.repo, graded.parent, wrong))
    assert tampered.outcome == "no"
    assert tampered.tampering == ["calc_boot.pth", "pytest.ini", "tests/conftest.py"]
    fixed = graded(diff(graded.repo, graded.parent, {**wrong, "calc.py": FIXED}))
    assert fixed.outcome == "resolved" and len(fixed.tampering) == 3
    # setup.cfg: its pytest section is protected, the rest is the fix's to change.
    section = graded(diff(graded.repo, graded.parent, {"setup.cfg": SETUP_CFG + "addopts = --deselect x\n"}))
    assert section.tampering == ["setup.cfg"]
    metadata = graded(diff(graded.repo, graded.parent, {"calc.py": FIXED,
                                                        "setup.cfg": SETUP_CFG.replace("calc", "calc2")}))
    assert (metadata.outcome, metadata.tampering) == ("resolved", [])


def test_a_candidate_editing_the_hidden_tests_gets_the_tasks_versions(graded):
    weakened = graded(diff(graded.repo, graded.parent, {
        "tests/test_calc.py": "def test_add():\n    pass\n", "tests/test_mine.py": "def test_mine():\n    pass\n"}))
    assert (weakened.outcome, weakened.touches_tests, weakened.tampering) == ("no", ["tests/test_calc.py"], [])
    # A test file the test patch leaves alone is the task's too: a fix that breaks mul() and rewrites the
    # P2P test that sees it does not pass.
    broken_mul = FIXED.replace("a * b", "a + b")
    hidden = graded(diff(graded.repo, graded.parent, {
        "calc.py": broken_mul, "tests/test_other.py": "def test_mul_squares():\n    pass\n"}))
    assert (hidden.outcome, hidden.touches_tests) == ("no", ["tests/test_other.py"])


def test_every_way_of_telling_pytest_not_to_run_the_tests_is_put_back_or_untrusted(graded):
    wrong = CALC.replace("a - b", "a * b")
    setup_plan = {"calc.py": wrong, "tests/pytest.toml": "[pytest]\naddopts = ['--setup-plan']\n"}
    toml = graded(diff(graded.repo, graded.parent, setup_plan))
    assert (toml.outcome, toml.tampering) == ("no", ["tests/pytest.toml"])
    # A header configparser reads as another section, and a key repeated in another case.
    odd = graded(diff(graded.repo, graded.parent, {
        "calc.py": wrong, "setup.cfg": SETUP_CFG + "\n[tool:pytest] #]\naddopts = --setup-plan\n"}))
    assert (odd.outcome, odd.tampering) == ("no", ["setup.cfg"])
    # A plugin declared by package metadata at the root, where pytest looks for entry points.
    plugin = graded(diff(graded.repo, graded.parent, {
        "calc.py": wrong, "evil.dist-info/entry_points.txt": "[pytest11]\nevil = calc\n",
        "evil.dist-info/METADATA": "Name: evil\nVersion: 1\n"}))
    assert plugin.outcome == "no"
    assert plugin.tampering == ["evil.dist-info/METADATA", "evil.dist-info/entry_points.txt"]
    # Code run at import that finds pytest's config (through its import hook: a walk of gc's objects is
    # untrusted of itself) and sets --setup-only: no test runs, and the run says so.
    by_code = graded(diff(graded.repo, graded.parent, {"calc.py": wrong + (
        "\n\nimport sys\nfor _found in sys.meta_path:\n"
        "    if hasattr(_found, 'config'):\n"
        "        _found.config.option.setuponly = True\n")}))
    assert by_code.outcome == "untrusted" and "not to run the tests (setuponly)" in by_code.detail


def test_binary_hunks_that_would_write_too_much_are_refused_before_anything_runs():
    bomb = ("diff --git a/zeros.bin b/zeros.bin\nnew file mode 100644\nindex 0000000..1111111\nGIT binary patch\n"
            "literal 4000000000\nzcmeIuu>k-800000\n\nliteral 0\nHcmV?d00001\n\n")
    nowhere = TaskToGrade(mirror_dir=None, base_sha="", test_patch="", fail_to_pass=(), pass_to_pass=())
    refused = candidate_grade(nowhere, bomb, builder=None, environment=None, work_root=None)
    assert refused.outcome == "does_not_apply" and "would write 3814 MB" in refused.detail


def test_a_test_patch_that_cannot_be_read_is_an_error_not_a_guess():
    cut_short = "diff --git a/t.py b/t.py\n--- a/t.py\n+++ b/t.py\n@@ -1,3 +1,3 @@\n-a\n"
    broken = TaskToGrade(mirror_dir=None, base_sha="", test_patch=cut_short, fail_to_pass=(), pass_to_pass=())
    graded = candidate_grade(broken, "", builder=None, environment=None, work_root=Path(tempfile.mkdtemp()))
    assert graded.outcome == "error" and "test patch cannot be read" in graded.detail


def test_a_candidate_laid_out_as_a_repository_cannot_rewrite_the_tests_through_git(graded):
    # A right add() but a mul() wrong for squares: the P2P test_mul_squares fails. The candidate also
    # edits the base's version of the test file the test patch changes, so it applies to the base alone
    # and the test patch is applied on top of it, after the put-right: a git that took the copy for a
    # repository would run its config's filter there, which weakens test_mul_squares again.
    candidate = graded(diff(graded.repo, graded.parent, {
        "calc.py": FIXED.replace("return a * b", "return a * b if a != b else 0"),
        "tests/test_calc.py": "from calc import mul  # edited\n\n\ndef test_mul():\n    assert mul(2, 3) == 6\n",
        "weaken.sh": "printf 'def test_mul_squares():\\n    pass\\n' > tests/test_other.py\ncat\n",
        "HEAD": "ref: refs/heads/main\n", "objects/keep": "", "refs/keep": "", ".gitattributes": "* filter=x\n",
        "config": "[core]\n\tbare = false\n\tworktree = .\n[filter \"x\"]\n\tclean = sh weaken.sh\n"}))
    assert (candidate.outcome, candidate.touches_tests) == ("no", ["tests/test_calc.py"]), candidate.detail
    assert candidate.runs[0].outcomes["tests/test_other.py::test_mul_squares"] == "FAILED"


def test_links_a_candidate_makes_are_put_back(graded):
    link = ("diff --git a/tests/conftest.py b/tests/conftest.py\nnew file mode 120000\n--- /dev/null\n"
            "+++ b/tests/conftest.py\n@@ -0,0 +1 @@\n+/etc/passwd\n\\ No newline at end of file\n"
            "diff --git a/helper.py b/helper.py\nnew file mode 120000\n--- /dev/null\n+++ b/helper.py\n"
            "@@ -0,0 +1 @@\n+calc.py\n\\ No newline at end of file\n")
    linked = graded(link + graded.gold)
    assert (linked.outcome, linked.tampering) == ("resolved", ["helper.py", "tests/conftest.py"])


def test_printed_passed_lines_and_reports_rewritten_at_import_are_not_resolved(graded):
    printing = graded(diff(graded.repo, graded.parent, {"calc.py": CALC + (
        "\nprint('tests/test_calc.py::test_add PASSED')\nprint('tests/test_calc.py::test_add_zero PASSED')\n"
        "print('===== 3 passed in 0.01s =====')\n")}))
    assert printing.outcome == "no"
    rewriting = CALC + (
        "\nimport _pytest.reports\n_original = _pytest.reports.TestReport.__init__\n\n\n"
        "def _forged(self, *args, **kwargs):\n    _original(self, *args, **kwargs)\n    self.outcome = 'passed'\n\n\n"
        "_pytest.reports.TestReport.__init__ = _forged\n")
    forged = graded(diff(graded.repo, graded.parent, {"calc.py": rewriting}))
    assert forged.outcome == "untrusted" and "cannot be believed" in forged.detail


def test_the_base_with_the_test_patch_is_kept_once_per_task_and_the_newest_only(graded):
    kept = GradeSettings(bases=graded.place / "bases", bases_kept=1)
    first = graded(graded.gold, settings=kept)
    (folder,) = (graded.place / "bases").iterdir()
    marker = folder / "repo" / "tests" / "test_calc.py"
    assert "test_add_ones" in marker.read_text() and marker.stat().st_uid == os.getuid()
    # The candidate's own edits never reach the kept copy, and the next grade uses it as it was.
    wrong = graded(diff(graded.repo, graded.parent, {"calc.py": CALC.replace("a - b", "a * b"),
                                                     "conftest.py": "raise SystemExit(1)\n"}), settings=kept)
    assert (first.outcome, wrong.outcome, wrong.tampering) == ("resolved", "no", ["conftest.py"])
    assert not (folder / "repo" / "conftest.py").exists() and list((graded.place / "bases").iterdir()) == [folder]
    # Another task's base (here: no test patch, so the F2P tests do not exist) pushes the older one out,
    # once no grade has used it for a day.
    os.utime(folder, (time.time() - 2 * 86400,) * 2)
    other = graded(graded.gold, settings=kept, test_patch="")
    assert other.outcome == "no" and list((graded.place / "bases").iterdir()) != [folder]
    assert len(list((graded.place / "bases").iterdir())) == 1


def test_a_flaky_task_grades_each_run_and_the_majority_decides(graded):
    thrice = graded(graded.gold, runs=3)
    assert thrice.outcome == "resolved" and len(thrice.runs) == 3


class _Run:
    def __init__(self, outcomes, untrusted="", status="failed", collection_error=False):
        self.outcomes, self.untrusted, self.status, self.collection_error = outcomes, untrusted, status, \
            collection_error


def test_outcomes_of_runs_worked_out_by_hand():
    grade = {"fail_to_pass": ["f1", "f2"], "pass_to_pass": ["p"]}
    assert run_outcome(_Run({"f1": "PASSED", "f2": "PASSED", "p": "PASSED"}), **grade) == "resolved"
    assert run_outcome(_Run({"f1": "PASSED", "f2": "FAILED", "p": "PASSED"}), **grade) == "partial"
    assert run_outcome(_Run({"f1": "PASSED", "f2": "PASSED", "p": "FAILED"}), **grade) == "no"
    assert run_outcome(_Run({"f1": "XFAIL", "f2": "PASSED", "p": "PASSED"}), **grade) == "partial"
    assert run_outcome(_Run({"f1": "XFAIL", "f2": "PASSED", "p": "PASSED"}), **grade, reference_xfail=["f1"]) == \
        "resolved"
    assert run_outcome(_Run({}, collection_error=True), **grade) == "error"
    assert run_outcome(_Run({"f1": "PASSED"}, status="timeout"), **grade) == "timeout"
    assert run_outcome(_Run({"f1": "PASSED"}, status="out_of_memory"), **grade) == "error"
    assert run_outcome(_Run({}, untrusted="forged: x"), **grade) == "untrusted"
    assert runs_outcome(["resolved", "no", "resolved"]) == "resolved"
    assert runs_outcome(["resolved", "no"]) == "no"  # a tie goes to the worse
    assert runs_outcome(["resolved", "resolved", "untrusted"]) == "untrusted"


# --- mutants: caught by tests written to catch them, surviving tests that are not ----------------

MUTATED_BEFORE = ("def clamp(value, low, high):\n    return value\n\n" + "# -\n" * 12 +
                  "\ndef parse(text):\n    return int(text)\n\n\ndef head(items):\n    return items[1]\n")
MUTATED_AFTER = (MUTATED_BEFORE
                 .replace("    return value\n", "    if value < low:\n        return low\n"
                                                 "    if value > high:\n        return high\n    return value\n")
                 .replace("    return int(text)",
                          "    if not text.strip():\n        raise ValueError('empty')\n    return int(text)")
                 .replace("items[1]", "items[0]"))
STRONG = ("import pytest\nfrom lib import clamp, head, parse\n\n\ndef test_clamp():\n    assert clamp(5, 0, 10) == 5\n"
          "    assert clamp(-1, 0, 10) == 0\n    assert clamp(11, 0, 10) == 10\n\n\ndef test_parse():\n"
          "    assert parse('3') == 3\n    with pytest.raises(ValueError, match='empty'):\n        parse(' ')\n\n\n"
          "def test_head():\n    assert head([1, 2]) == 1\n")
WEAK = "from lib import clamp\n\n\ndef test_high():\n    assert clamp(11, 0, 10) <= 10\n"


@pytest.mark.parametrize("tests, caught", [(STRONG, True), (WEAK, False)], ids=["strong", "weak"])
def test_every_mutant_kind_is_caught_by_tests_written_for_it_and_survives_weak_ones(open_folder, tests, caught):
    builder = EnvironmentBuilder(env_root=open_folder / "envs", uv=UV)
    repo = GitRepo(open_folder / "lib")
    parent = repo.commit("init", {"lib.py": MUTATED_BEFORE, "tests/test_lib.py": "def test_nothing():\n    pass\n"})
    fix = repo.commit("Fix", {"lib.py": MUTATED_AFTER, "tests/test_lib.py": tests})
    result, patches, task = validated(repo, parent, fix, builder, open_folder)
    mutants = mutants_make(patches.source_patch, {"lib.py": (MUTATED_BEFORE, MUTATED_AFTER)})
    assert sorted(mutant.kind for mutant in mutants) == sorted(MUTANT_KINDS)
    outcomes = {mutant.kind: candidate_grade(task, mutant.patch, builder=builder, environment=result.environment,
                                             work_root=open_folder).outcome for mutant in mutants}
    if caught:
        assert all(outcome != "resolved" for outcome in outcomes.values()), outcomes
    else:
        assert outcomes == dict.fromkeys(MUTANT_KINDS, "resolved")
