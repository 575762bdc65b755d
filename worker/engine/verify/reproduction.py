"""The execution verifier's tests, before any candidate runs them.

Reproduction tests are written by the test writer from the issue alone (never the hidden tests, the
test patch or the gold patch): it sees the issue and the names of the repository's Python modules, so
that it imports what it tests the way the library's users do. They land at the repository's root
under a prefix of their own. Regression tests are the repository's own, near what the candidates
touch (regression.py). Both run once on the base commit: a reproduction test that passes there
reproduces nothing (it stays, and does not count); a regression test is kept only if it passes there.
"""

from worker.engine.grade.source_edits import file_diff
from worker.engine.llm.prompts import clip_head
from worker.engine.run.pytest_run import PASSING
from worker.engine.verify.matrix import VerifierTest

REPRODUCTION_PREFIX = "test_commitgym_reproduction"
ISSUE_CHARS = 8_000
MODULES_CHARS = 3_000  # of the list of module paths shown


def reproduction_prompt_variables(*, issue: str, paths: list[str]) -> dict[str, str]:
    """What the reproduction prompt is given: the issue and the paths of the base commit's Python
    source files (test files left out: the hidden tests are among them)."""
    modules = "\n".join(sorted(paths))
    return {"issue": clip_head(issue.strip(), ISSUE_CHARS),
            "modules": clip_head(modules, MODULES_CHARS) or "(no Python module found)"}


def reproduction_files(contents: list[str]) -> dict[str, str]:
    """Each test file taken from the writer's answer, at the repository's root, by its name."""
    return {f"{REPRODUCTION_PREFIX}_{index}.py": text for index, text in enumerate(contents)}


def files_added_patch(files: dict[str, str]) -> str:
    """A patch that adds these files (path -> text), for the runs that apply it like a test patch."""
    return "".join(file_diff(path, None, text) for path, text in sorted(files.items()))


def verifier_tests_from_base_run(outcomes: dict[str, str], reproduction_paths: list[str]) -> list[VerifierTest]:
    """The verifier tests a base commit's run gives: every reproduction test collected (passing there
    or not), and the regression tests that passed, in the run's order."""
    reproduction = set(reproduction_paths)
    tests = []
    for test_id, status in outcomes.items():
        if test_id.split("::")[0] in reproduction:
            tests.append(VerifierTest(test_id, "reproduction", passes_on_base=status in PASSING))
        elif status == "PASSED":
            tests.append(VerifierTest(test_id, "regression", passes_on_base=True))
    return tests
