"""The judge's style probes: rewrites that change how a candidate reads, never what it does."""

import ast
import random
import subprocess

from worker.engine.grade.source_edits import file_diff, patch_applied
from worker.engine.verify.probes import STYLE_REWRITES, style_rewrites

BASE = "def clamp(value, low, high):\n    return value\n\n\nLIMIT = 3\n"
CANDIDATE = ("def clamp(value, low, high):\n"
             "    # keep the value in the range\n"
             "    bounded = max(low, value)  # not below\n"
             "    result = min(high, bounded)\n"
             "    return result\n\n\nLIMIT = 3\n")


def applied(tmp_path, patch: str) -> str:
    """The base with `patch` applied by git, as grading applies a candidate."""
    (tmp_path / "lib.py").write_text(BASE)
    (tmp_path / "change.patch").write_text(patch)
    subprocess.run(["git", "apply", "change.patch"], cwd=tmp_path, check=True, capture_output=True)
    return (tmp_path / "lib.py").read_text()


def test_each_rewrite_reads_differently_and_does_the_same(tmp_path):
    patch = file_diff("lib.py", BASE, CANDIDATE)
    rewrites = {r.kind: r for r in style_rewrites(patch, {"lib.py": (BASE, CANDIDATE)})}
    assert sorted(rewrites) == sorted(STYLE_REWRITES)
    texts = {}
    for kind, rewrite in rewrites.items():
        folder = tmp_path / kind
        folder.mkdir()
        texts[kind] = applied(folder, rewrite.patch)
        assert texts[kind] != CANDIDATE and rewrite.files == ["lib.py"]
    assert "#" not in texts["comments_removed"] and "bounded = max(low, value)\n" in texts["comments_removed"]
    assert ast.dump(ast.parse(texts["comments_removed"])) == ast.dump(ast.parse(CANDIDATE))
    assert ast.dump(ast.parse(texts["reformatted"])) == ast.dump(ast.parse(CANDIDATE))
    assert "value_1 = max(low, value)" in texts["locals_renamed"] and "bounded" not in texts["locals_renamed"]
    # Run, each gives what the candidate gives.
    for text in [CANDIDATE, *texts.values()]:
        space = {}
        exec(compile(text, "lib.py", "exec"), space)  # noqa: S102 - text written in this test
        assert [space["clamp"](v, 0, 10) for v in (-1, 5, 11)] == [0, 5, 10]


def test_code_whose_names_others_could_see_is_not_renamed():
    for body in ("    total = 1\n    return f'{total}'\n",  # an f-string
                 "    total = 1\n    return locals()\n",  # locals() sees the names
                 "    global LIMIT\n    LIMIT = 2\n    return LIMIT\n",
                 "    total = 1\n    return [total for _ in range(2)]\n"):  # a nested scope
        text = "def f(x):\n" + body
        patch = file_diff("m.py", "def f(x):\n    return x\n", text)
        kinds = {r.kind for r in style_rewrites(patch, {"m.py": ("def f(x):\n    return x\n", text)})}
        assert "locals_renamed" not in kinds, body


def test_nothing_to_rewrite_gives_nothing():
    same = "def f(x):\n    return x + 1\n"
    patch = file_diff("m.py", "def f(x):\n    return x\n", same)
    assert [r.kind for r in style_rewrites(patch, {"m.py": ("def f(x):\n    return x\n", same)})] == []
    python2 = "def f(x):\n    print x\n"
    assert style_rewrites(file_diff("m.py", None, python2), {"m.py": (None, python2)}) == []
    assert style_rewrites("not a patch", {"m.py": (None, same)}) == []


def test_a_patch_applied_in_memory_gives_what_git_apply_gives(tmp_path):
    rng = random.Random(11)
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    for case in range(60):
        before = "".join(f"line {rng.randint(0, 5)}\n" for _ in range(rng.randint(1, 25)))
        after = "".join(line if rng.random() < 0.7 else f"new {rng.randint(0, 9)}\n"
                        for line in before.splitlines(keepends=True)) + ("tail" if case % 3 == 0 else "")
        if after == before:
            continue
        (tmp_path / "f.py").write_text(before)
        (tmp_path / "p.diff").write_text(file_diff("f.py", before, after))
        subprocess.run(["git", "apply", "p.diff"], cwd=tmp_path, check=True)
        assert patch_applied(file_diff("f.py", before, after), {"f.py": before}) == {"f.py": (tmp_path / "f.py")
                                                                                     .read_text()}
    # A new file; a file the patch does not name; hunks that do not match the text; not a patch at all.
    assert patch_applied(file_diff("n.py", None, "a\nb"), {"n.py": None, "o.py": "x\n"}) == {"n.py": "a\nb",
                                                                                           "o.py": None}
    assert patch_applied(file_diff("f.py", "a\nb\n", "a\nc\n"), {"f.py": "z\nb\n"}) == {"f.py": None}
    assert patch_applied("not a patch", {"f.py": "a\n"}) == {"f.py": None}
