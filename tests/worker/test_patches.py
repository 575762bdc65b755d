import subprocess

from tests.gitrepo import GitRepo
from worker.engine.git.patches import commit_patches, commits_patches
from worker.engine.test_files import TestFileRules


def _tree(repo: GitRepo) -> str:
    repo.git("add", "-A")
    return repo.git("write-tree")


def _apply(repo: GitRepo, patch: str) -> None:
    subprocess.run(["git", "apply", "--binary", "-"], cwd=repo.path, input=patch.encode(), check=True)


def test_source_and_test_patches_rebuild_the_commit(git_repo):
    git_repo.commit("init", {"pkg/core.py": "def f():\n    return 1\n", "tests/test_core.py": "", "logo.png": b"\x89P"})
    parent = git_repo.git("rev-parse", "HEAD")
    sha = git_repo.commit("fix", {
        "pkg/core.py": "def f():\n    return 2\n",
        "tests/test_core.py": "from pkg.core import f\n\ndef test_f():\n    assert f() == 2\n",
        "pkg/conftest.py": "X = 1\n",
        "docs/space name.md": "doc\n",
        "logo.png": b"\x89P\x00\x01",
    })
    patches = commit_patches(git_repo.path, sha, parent, TestFileRules())
    assert sorted(patches.test_files) == ["pkg/conftest.py", "tests/test_core.py"]
    assert "tests/test_core.py" in patches.test_patch and "pkg/core.py" not in patches.test_patch
    assert "pkg/core.py" in patches.source_patch and "GIT binary patch" in patches.source_patch
    commit_tree = git_repo.git("rev-parse", f"{sha}^{{tree}}")

    git_repo.git("checkout", "-q", parent)
    _apply(git_repo, patches.test_patch)
    _apply(git_repo, patches.source_patch)
    assert _tree(git_repo) == commit_tree


def test_text_that_is_not_utf8_survives_as_a_binary_patch(git_repo):
    """A latin-1 fixture (or source) would lose its bytes as text: its part of the patch is git's binary one."""
    git_repo.commit("init", {"pkg/core.py": "X = 1\n", "tests/data/menu.csv": "caf\xe9;1\n".encode("latin-1")})
    parent = git_repo.git("rev-parse", "HEAD")
    sha = git_repo.commit("fix", {
        "pkg/core.py": "X = 2  # caf\xe9\n".encode("latin-1"),
        "tests/data/menu.csv": "caf\xe9 cr\xe8me;3,50\n".encode("latin-1"),
        "tests/data/new file \xe9.csv": "cr\xe8me\n".encode("latin-1"),
        "tests/test_core.py": "def test_x():\n    assert 'caf\xe9'\n",
    })
    patches = commit_patches(git_repo.path, sha, parent, TestFileRules())
    assert patches.source_patch.isascii() and "GIT binary patch" in patches.source_patch
    assert patches.test_patch.count("GIT binary patch") == 2 and "+def test_x" in patches.test_patch  # UTF-8 stays text
    commit_tree = git_repo.git("rev-parse", f"{sha}^{{tree}}")
    git_repo.git("checkout", "-q", parent)
    _apply(git_repo, patches.test_patch)
    _apply(git_repo, patches.source_patch)
    assert _tree(git_repo) == commit_tree


def test_a_root_commit_is_split_against_the_empty_tree(git_repo):
    sha = git_repo.commit("init", {"a.py": "x = 1\n", "test_a.py": "def test_a():\n    pass\n"})
    patches = commit_patches(git_repo.path, sha, "", TestFileRules())
    assert patches.test_files == ["test_a.py"] and "new file mode" in patches.source_patch


def test_a_commit_without_tests_has_an_empty_test_patch(git_repo):
    git_repo.commit("init", {"a.py": "x = 1\n"})
    parent = git_repo.git("rev-parse", "HEAD")
    sha = git_repo.commit("fix", {"a.py": "x = 2\n"})
    patches = commit_patches(git_repo.path, sha, parent, TestFileRules())
    assert patches.test_patch == "" and patches.test_files == []


def test_many_commits_are_split_by_one_reading_as_each_alone(git_repo):
    """Paths with quotes, backslashes, tabs and spaces, a rename, a deletion, a mode change and an
    empty commit: the batch gives what diffing each commit against its parent by pathspec gives."""
    git_repo.commit("init", {"pkg/a.py": "a = 1\n", "tests/test_a.py": "x\n", "tests/old_name.py": "y\n"})
    pairs = [(git_repo.git("rev-parse", "HEAD"), "")]
    steps = [
        {"pkg/a.py": "a = 2\n", 'tests/test_"q".py': "q\n", "pkg/back\\slash.py": "b\n", "pkg/t\tab.py": "t\n"},
        {"pkg/sp ace.py": "s\n", "pkg/é.py": "e\n"},
    ]
    for files in steps:
        parent = git_repo.git("rev-parse", "HEAD")
        pairs.append((git_repo.commit("step", files), parent))
    parent = git_repo.git("rev-parse", "HEAD")
    git_repo.git("mv", "tests/old_name.py", "tests/new_name.py")
    git_repo.git("rm", "-q", "tests/test_a.py")
    (git_repo.path / "pkg/a.py").chmod(0o755)
    git_repo.git("add", "-A")
    git_repo.git("commit", "-q", "-m", "moves")
    pairs.append((git_repo.git("rev-parse", "HEAD"), parent))
    parent = pairs[-1][0]
    git_repo.git("commit", "-q", "--allow-empty", "-m", "nothing")
    pairs.append((git_repo.git("rev-parse", "HEAD"), parent))

    batch = commits_patches(git_repo.path, pairs, TestFileRules())
    assert list(batch) == [sha for sha, _ in pairs]
    for sha, parent in pairs:
        expected = _pathspec_patches(git_repo, sha, parent)
        assert (batch[sha].source_patch, batch[sha].test_patch) == expected, sha
    assert sorted(batch[pairs[1][0]].test_files) == ['tests/test_"q".py']
    assert batch[pairs[-1][0]].source_patch == batch[pairs[-1][0]].test_patch == ""
    assert "old mode 100644" in batch[pairs[3][0]].source_patch


def _pathspec_patches(repo: GitRepo, sha: str, parent: str) -> tuple[str, str]:
    base = parent or "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
    names = subprocess.run(["git", "diff", "--name-only", "--no-renames", "-z", base, sha], cwd=repo.path,
                           capture_output=True, check=True).stdout.decode().split("\0")
    rules = TestFileRules()
    split = {kind: [path for path in names if path and (rules.kind(path) == "test") == (kind == "test")]
             for kind in ("source", "test")}

    def diff(paths):
        if not paths:
            return ""
        return subprocess.run(["git", "-c", "core.quotePath=false", "diff", "--binary", "--no-renames", "-U3",
                               "--src-prefix=a/", "--dst-prefix=b/", base, sha, "--",
                               *[f":(literal){path}" for path in paths]],
                              cwd=repo.path, capture_output=True, check=True).stdout.decode()
    return diff(split["source"]), diff(split["test"])
