"""Mutants of a gold patch, worked out by hand (worker/engine/grade/mutants.py); that the hidden
tests catch them or not is graded for real in tests/worker/test_grade_candidate.py."""

import subprocess

from tests.gitrepo import GitRepo
from worker.engine.grade.mutants import MUTANT_KINDS, mutants_make

BEFORE = '''def clamp(value, low, high):
    return value


def parse(text):
    return int(text)
'''
AFTER = '''def clamp(value, low, high):
    if value < low:
        return low
    if value > high:
        return high
    return value


def parse(text):
    if not text.strip():
        raise ValueError("empty")
    return int(text)
'''


def gold(tmp_path):
    repo = GitRepo(tmp_path / "lib")
    base = repo.commit("init", {"lib.py": BEFORE})
    fix = repo.commit("fix", {"lib.py": AFTER})
    return repo, base, repo.git("diff", base, fix) + "\n"


def applied(repo, base, patch) -> str:
    repo.git("checkout", "-q", base)
    (repo.path / "m.patch").write_text(patch)
    subprocess.run(["git", "apply", "m.patch"], cwd=repo.path, check=True, capture_output=True)
    text = (repo.path / "lib.py").read_text()
    repo.git("checkout", "-q", "--", ".")
    (repo.path / "m.patch").unlink()
    for extra in ("conftest.py",):
        (repo.path / extra).unlink(missing_ok=True)
    repo.git("checkout", "-q", "main")
    return text


def test_one_mutant_of_each_kind_each_applying_to_the_base_and_saying_how_it_was_made(tmp_path):
    repo, base, patch = gold(tmp_path)
    mutants = {mutant.kind: mutant for mutant in mutants_make(patch, {"lib.py": (BEFORE, AFTER)})}
    # No whole number on an added line, and one hunk: no off-by-one, no reverted hunk (the next test has them).
    assert set(mutants) == set(MUTANT_KINDS) - {"off_by_one", "reverted_hunk"}
    expected = {
        "flipped_comparison": AFTER.replace("value < low", "value >= low"),
        "deleted_statement": AFTER.replace("        return low\n", "        pass\n", 1),
        "swallowed_exception": AFTER.replace('        raise ValueError("empty")', "        pass"),
        "hard_coded_return": AFTER.replace("        return low\n", "        return None\n", 1),
    }
    for kind, text in expected.items():
        assert applied(repo, base, mutants[kind].patch) == text, kind
    assert mutants["flipped_comparison"].made == {"file": "lib.py", "line": 2, "description": "`<` flipped to `>=`"}
    # The tampering mutant: the first wrong one, and a conftest.py that passes every test.
    assert mutants["tampering"].made["based_on"] == "flipped_comparison"
    assert "+++ b/conftest.py" in mutants["tampering"].patch
    assert applied(repo, base, mutants["tampering"].patch) == expected["flipped_comparison"]


def test_a_multi_hunk_fix_gets_one_hunk_reverted_and_numbers_are_bumped(tmp_path):
    before = "def first(items):\n    return items[1]\n\n\n" + "\n" * 10 + "def size(items):\n    return len(items)\n"
    after = before.replace("items[1]", "items[0]").replace("len(items)", "len(items) - 0")
    repo = GitRepo(tmp_path / "lib")
    base = repo.commit("init", {"lib.py": before})
    fix = repo.commit("fix", {"lib.py": after})
    patch = repo.git("diff", base, fix) + "\n"
    mutants = {mutant.kind: mutant for mutant in mutants_make(patch, {"lib.py": (before, after)})}
    assert applied(repo, base, mutants["reverted_hunk"].patch) == before.replace("items[1]", "items[0]")
    assert applied(repo, base, mutants["off_by_one"].patch) == after.replace("items[0]", "items[1]")
    assert mutants["off_by_one"].made["description"] == "0 made 1"


def test_no_mutant_of_code_python_3_cannot_parse_or_of_a_fix_with_nothing_to_mutate():
    python2 = "def f(x):\n    print 'x'\n    return x\n"
    patch = ("diff --git a/p.py b/p.py\n--- a/p.py\n+++ b/p.py\n@@ -1,2 +1,3 @@\n def f(x):\n+    print 'x'\n"
             "     return x\n")
    assert mutants_make(patch, {"p.py": ("def f(x):\n    return x\n", python2)}) == []
    assert mutants_make("", {}) == []
