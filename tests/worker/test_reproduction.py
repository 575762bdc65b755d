"""The execution verifier's tests before any candidate runs them: what the test writer is shown, the
files taken from its answer, and which tests a base commit's run keeps."""

import subprocess
from string import Template

from worker.engine.llm.prompts import prompt_load
from worker.engine.run.pytest_run import output_section_of
from worker.engine.verify.reproduction import (
    REPRODUCTION_PREFIX,
    files_added_patch,
    reproduction_files,
    reproduction_prompt_variables,
    verifier_tests_from_base_run,
)


def test_the_writer_sees_the_issue_and_module_names_only():
    variables = reproduction_prompt_variables(issue="  slugify('') raises IndexError  ",
                                              paths=["textkit/slug.py", "textkit/__init__.py"])
    assert variables == {"issue": "slugify('') raises IndexError", "modules": "textkit/__init__.py\ntextkit/slug.py"}
    messages = prompt_load("reproduction_writer").messages(**variables)
    text = "\n".join(m["content"] for m in messages)
    assert "slugify('') raises IndexError" in text and "textkit/slug.py" in text
    # The prompt has no place for a patch, a commit message or the hidden tests: only these two variables.
    prompt = prompt_load("reproduction_writer")
    assert {name for part in (prompt.system, prompt.user, *prompt.more_user)
            for name in Template(part).get_identifiers()} == {"issue", "modules"}
    assert reproduction_prompt_variables(issue="x", paths=[])["modules"] == "(no Python module found)"


def test_files_of_their_own_prefix_and_a_patch_git_applies(tmp_path):
    files = reproduction_files(["def test_a():\n    assert 1\n", "def test_b():\n    assert 0"])
    assert list(files) == [f"{REPRODUCTION_PREFIX}_0.py", f"{REPRODUCTION_PREFIX}_1.py"]
    assert REPRODUCTION_PREFIX != "test_commitgym_generated"  # never mistaken for a task's generated tests
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "patch").write_text(files_added_patch(files))
    subprocess.run(["git", "apply", "patch"], cwd=tmp_path, check=True)
    assert {name: (tmp_path / name).read_text() for name in files} == {
        f"{REPRODUCTION_PREFIX}_0.py": "def test_a():\n    assert 1\n",
        f"{REPRODUCTION_PREFIX}_1.py": "def test_b():\n    assert 0"}


def test_the_base_run_keeps_every_reproduction_test_and_the_regression_tests_that_pass():
    outcomes = {"test_commitgym_reproduction_0.py::test_fails": "FAILED",
                "test_commitgym_reproduction_0.py::test_passes": "PASSED",
                "tests/test_slug.py::test_ok": "PASSED", "tests/test_slug.py::test_broken": "FAILED",
                "tests/test_slug.py::test_skipped": "SKIPPED", "tests/test_wrap.py::test_xfail": "XFAIL"}
    tests = verifier_tests_from_base_run(outcomes, ["test_commitgym_reproduction_0.py"])
    assert [(t.test_id, t.kind, t.passes_on_base, t.counts) for t in tests] == [
        ("test_commitgym_reproduction_0.py::test_fails", "reproduction", False, True),
        # Passes before any fix: reproduces nothing. It stays, and does not count.
        ("test_commitgym_reproduction_0.py::test_passes", "reproduction", True, False),
        ("tests/test_slug.py::test_ok", "regression", True, True)]


OUTPUT = """F.F                                                                      [100%]
=================================== FAILURES ===================================
___________________________________ test_one ___________________________________

    def test_one():
>       assert 1 == 2
E       assert 1 == 2
______________________________ TestWrap.test_two _______________________________

    def test_two(self):
>       raise ValueError("no")
E       ValueError: no
=========================== short test summary info ============================
FAILED tests/test_x.py::test_one - assert 1 == 2
"""


def test_each_tests_log_is_its_section_of_the_output():
    one = output_section_of(OUTPUT, "tests/test_x.py::test_one")
    assert one.startswith("___") and "assert 1 == 2" in one and "ValueError" not in one
    two = output_section_of(OUTPUT, "tests/test_x.py::TestWrap::test_two")
    assert "ValueError: no" in two and "short test summary" not in two
    assert output_section_of(OUTPUT, "tests/test_x.py::test_three") is None
