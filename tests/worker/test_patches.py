import subprocess

from tests.gitrepo import GitRepo
from worker.engine.git.patches import commit_patches
from worker.engine.mine.filters import TestFileRules


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
