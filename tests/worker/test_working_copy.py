import pytest

from tests.gitrepo import GitRepo
from worker.engine.git.patches import commit_patches
from worker.engine.git.working_copy import patch_apply, working_copy_write
from worker.engine.sandbox.local import LocalSandbox
from worker.engine.test_files import TestFileRules


@pytest.fixture
def place(open_folder):
    return open_folder


def test_a_working_copy_plus_the_patches_is_the_commit(place):
    repo = GitRepo(place / "origin")
    parent = repo.commit("init", {"pkg/a.py": "x = 1\n", "tests/test_a.py": "", "link": b""})
    sha = repo.commit("fix", {"pkg/a.py": "x = 2\n", "tests/test_a.py": "def test_a():\n    pass\n"})
    patches = commit_patches(repo.path, sha, parent, TestFileRules())
    work = place / "work"
    copy = working_copy_write(repo.path, parent, work)
    assert (copy / "pkg" / "a.py").read_text() == "x = 1\n"
    sandbox = LocalSandbox()
    assert patch_apply(sandbox, work, patches.test_patch).ok
    assert patch_apply(sandbox, work, patches.source_patch).ok
    assert (copy / "pkg" / "a.py").read_text() == "x = 2\n"
    assert (copy / "tests" / "test_a.py").read_text().startswith("def test_a")
    assert patch_apply(sandbox, work, "").ok


def test_a_patch_that_does_not_apply_fails_without_harm(place):
    repo = GitRepo(place / "origin")
    sha = repo.commit("init", {"a.py": "x = 1\n"})
    work = place / "work"
    working_copy_write(repo.path, sha, work)
    bad = "--- a/a.py\n+++ b/a.py\n@@ -1 +1 @@\n-y = 9\n+y = 10\n"
    result = patch_apply(LocalSandbox(), work, bad)
    assert result.status == "failed" and b"patch does not apply" in result.output
    assert (work / "repo" / "a.py").read_text() == "x = 1\n"


def test_a_patch_cannot_write_outside_the_working_copy(place):
    repo = GitRepo(place / "origin")
    sha = repo.commit("init", {"a.py": "x = 1\n"})
    work = place / "work"
    working_copy_write(repo.path, sha, work)
    escape = "--- /dev/null\n+++ b/../../escaped.txt\n@@ -0,0 +1 @@\n+out\n"
    patch_apply(LocalSandbox(), work, escape)
    assert not (place / "escaped.txt").exists()


def test_export_ignore_does_not_hide_files_from_working_copies(place):
    repo = GitRepo(place / "origin")
    sha = repo.commit("init", {".gitattributes": "tests/ export-ignore\n", "tests/test_a.py": "x = 1\n"})
    copy = working_copy_write(repo.path, sha, place / "work")
    assert (copy / "tests" / "test_a.py").read_text() == "x = 1\n"


def test_a_tree_with_a_link_out_of_itself_is_refused_with_a_reason(place):
    from worker.engine.git.repo import GitError

    repo = GitRepo(place / "origin")
    (repo.path / "escape").symlink_to("/etc/passwd")
    sha = repo.commit("link", {"a.py": "x = 1\n"})
    with pytest.raises(GitError) as refused:
        working_copy_write(repo.path, sha, place / "work")
    assert refused.value.code == "unsafe_tree" and "cannot be checked out safely" in str(refused.value)
