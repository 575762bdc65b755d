"""The history walker on real git repositories, without a database."""

import json
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest

from tests.gitrepo import GitRepo
from worker.engine.git.repo import BlobReader, GitError
from worker.engine.git.working_copy import working_copy_write
from worker.engine.mine.filters import MiningFilters, drop_reason
from worker.engine.mine.walk import MAX_LISTED_FILES, PythonFileChange, commits_walk, python_changes_checked
from worker.engine.test_files import TestFileRules


def _walk(repo: GitRepo, **kwargs):
    return {c.message: c for c in commits_walk(repo.path, repo.git("rev-parse", "HEAD"), **kwargs)}


def _python_change(blobs: BlobReader, commit) -> bool:
    (checked,) = python_changes_checked([commit], blobs)
    return checked.stats.python_change


def _git_show_chars(repo: GitRepo, sha: str, paths: list[str]) -> int:
    out = subprocess.run(["git", "show", "--format=", "-U3", sha, "--", *paths], cwd=repo.path,
                         capture_output=True, check=True).stdout
    return len(out.decode("utf-8", "replace"))


def test_files_are_split_and_measured(git_repo):
    git_repo.commit("init", {"pkg/core.py": "a = 1\nb = 2\n", "README.md": "x\n", "tests/test_core.py": "t = 1\n"})
    sha = git_repo.commit("change", {
        "pkg/core.py": "a = 1\nb = 3\nc = 4\n",
        "README.md": "y\n",
        "tests/test_core.py": "t = 2\n",
        "pkg/conftest.py": "fixture = 1\n",
    })
    commit = _walk(git_repo)["change"]
    stats = commit.stats
    assert commit.sha == sha and len(commit.parent_sha) == 40
    assert stats.source_files == ["pkg/core.py"] and stats.other_files == ["README.md"]
    assert sorted(stats.test_files) == ["pkg/conftest.py", "tests/test_core.py"]
    assert (stats.source_file_count, stats.other_file_count, stats.test_file_count) == (1, 1, 2)
    assert (stats.lines_added, stats.lines_deleted) == (3, 2)
    assert stats.tests_changed and not stats.has_binary
    assert stats.patch_chars == _git_show_chars(git_repo, sha, ["pkg/core.py", "README.md"])


def test_root_commit_has_no_parent_and_merges_are_marked(git_repo):
    root = git_repo.commit("root", {"a.py": "x = 1\n"})
    git_repo.git("checkout", "-q", "-b", "side")
    git_repo.commit("side work", {"b.py": "y = 1\n"})
    git_repo.git("checkout", "-q", "main")
    git_repo.commit("main work", {"a.py": "x = 2\n"})
    git_repo.git("merge", "-q", "--no-ff", "-m", "merge side", "side")
    commits = _walk(git_repo)
    assert set(commits) == {"root", "side work", "main work", "merge side"}
    assert commits["root"].sha == root and commits["root"].parent_sha == ""
    assert [m for m, c in commits.items() if c.merge] == ["merge side"]
    assert commits["merge side"].stats.patch_chars == 0


def test_only_commits_after_the_excluded_tip_are_walked(git_repo):
    git_repo.commit("one", {"a.py": "x = 1\n"})
    old_tip = git_repo.commit("two", {"a.py": "x = 2\n"})
    git_repo.commit("three", {"a.py": "x = 3\n"})
    assert list(_walk(git_repo, exclude=(old_tip,))) == ["three"]


def test_non_utf8_messages_diffs_and_odd_paths_are_mined(git_repo):
    git_repo.commit("init", {"data.txt": "plain\n"})
    git_repo.commit(b"caf\xe9 fix \xff", {
        "data.txt": b"caf\xe9\n",
        "pkg/with space.py": "x = 1\n",
        "pkg/\xfcber.py": "y = 1\n",
        'pkg/quote"d.py': "z = 1\n",
    })
    (commit,) = [c for c in commits_walk(git_repo.path, git_repo.git("rev-parse", "HEAD")) if c.message.startswith("caf")]
    # Bytes that are not UTF-8 and that no encoding header declared are read as Latin-1.
    assert commit.message == "caf\xe9 fix \xff"
    assert sorted(commit.stats.source_files) == ['pkg/quote"d.py', "pkg/with space.py", "pkg/\xfcber.py"]
    assert commit.stats.other_files == ["data.txt"]
    assert commit.stats.lines_added == 4 and commit.stats.lines_deleted == 1


def test_a_message_is_decoded_by_its_encoding_header_then_as_latin_1(git_repo):
    git_repo.commit("init", {"a.py": "x = 1\n"})
    message = git_repo.path.parent / "message.txt"
    message.write_bytes("\u03ba\u03b1\u03c6\u03ad menu\n".encode("iso-8859-7"))
    git_repo.git("-c", "i18n.commitEncoding=ISO-8859-7", "commit", "-q", "--allow-empty", "-F", str(message))
    messages = {commit.message for commit in commits_walk(git_repo.path, git_repo.git("rev-parse", "HEAD"))}
    assert "\u03ba\u03b1\u03c6\u03ad menu" in messages  # Greek, by its header: not Latin-1 letters


def test_renames_and_binary_files(git_repo):
    git_repo.commit("init", {"pkg/old_name.py": "def f():\n    return 1\n" * 5})
    git_repo.commit("rename", {"pkg/old_name.py": None, "pkg/new_name.py": "def f():\n    return 1\n" * 5})
    git_repo.commit("image", {"docs/logo.png": b"\x89PNG\r\n\x1a\n\x00\x01\x02"})
    commits = _walk(git_repo)
    assert commits["rename"].stats.source_files == ["pkg/new_name.py"]
    (change,) = commits["rename"].python_changes
    assert (change.old_path, change.new_path, change.blocks) == ("pkg/old_name.py", "pkg/new_name.py", [])
    assert commits["image"].stats.has_binary
    with BlobReader(git_repo.path) as blobs:
        assert _python_change(blobs, commits["rename"]) is False


def test_changed_line_numbers_follow_the_hunks(git_repo):
    git_repo.commit("init", {"m.py": "".join(f"line{i} = {i}\n" for i in range(1, 31))})
    git_repo.commit("edit", {"m.py": "".join(f"line{i} = {i}\n" for i in range(1, 31) if i != 5)
                                     .replace("line20 = 20", "line20 = 200") + "tail = 1\n"})
    (change,) = _walk(git_repo)["edit"].python_changes
    assert change.blocks == [([5], []), ([20], [19]), ([], [30])] and change.complete


def test_python_check_reads_both_sides(git_repo):
    git_repo.commit("init", {"m.py": 'def f():\n    """Doc."""\n    return 1\n'})
    git_repo.commit("docstring", {"m.py": 'def f():\n    """Better doc."""\n    return 1\n'})
    git_repo.commit("code", {"m.py": 'def f():\n    """Better doc."""\n    return 2\n'})
    commits = _walk(git_repo)
    with BlobReader(git_repo.path) as blobs:
        assert _python_change(blobs, commits["docstring"]) is False
        assert _python_change(blobs, commits["code"]) is True
        assert _python_change(blobs, commits["init"]) is True


def test_the_file_before_is_rebuilt_from_the_diff_across_hunks(git_repo):
    """Docstrings that open and close outside the hunks' context, several hunks, lines added
    and removed, no newline at the end: only the file after the change is read."""
    doc = "".join(f"    line {i} of the story\n" for i in range(12))
    body = "".join(f"x{i} = {i}\n" for i in range(30))
    before = f'def f():\n    """\n{doc}    """\n    return 1\n\n{body}\n\ndef g():\n    """\n{doc}    """'
    git_repo.commit("init", {"m.py": before})
    reworded = before.replace("line 6 of", "sixth line of").replace("line 7 of the story\n", "")
    reworded = reworded.replace("line 4 of", "line four of") + "\n"
    git_repo.commit("docs only", {"m.py": reworded})
    git_repo.commit("code", {"m.py": reworded.replace("x20 = 20\n", "x20 = 21\nx_new = 1\n")})
    commits = _walk(git_repo)
    (change,) = commits["code"].python_changes
    assert len(change.blocks) == 1
    asked = []

    class CountingReader(BlobReader):
        def ask(self, names):
            asked.extend(names)
            super().ask(names)

    with CountingReader(git_repo.path) as blobs:
        assert _python_change(blobs, commits["docs only"]) is False
        assert _python_change(blobs, commits["code"]) is True
    assert list(dict.fromkeys(asked)) == [commits["docs only"].python_changes[0].new_blob, change.new_blob]


def test_patch_length_boundary_on_real_diffs(git_repo):
    """2,000 characters of non-test diff is kept; 2,001 is dropped."""
    git_repo.commit("init", {"README.md": "x\n"})
    git_repo.commit("probe", {"pkg/a.py": 'x = "' + "p" * 10 + '"\n'})
    probe = _walk(git_repo)["probe"].stats.patch_chars
    pad = 10 + 2000 - probe
    git_repo.commit("at limit", {"pkg/b.py": 'x = "' + "p" * pad + '"\n'})
    git_repo.commit("over limit", {"pkg/c.py": 'x = "' + "p" * (pad + 1) + '"\n'})
    commits = _walk(git_repo)
    for message in ("at limit", "over limit"):
        commits[message].stats.python_change = True
    assert commits["at limit"].stats.patch_chars == 2000
    assert drop_reason(commits["at limit"].stats, MiningFilters()) is None
    assert drop_reason(commits["over limit"].stats, MiningFilters()) == "patch_too_long"


def test_custom_test_rules_change_the_split(git_repo):
    git_repo.commit("init", {"spec/parser_spec.py": "x = 1\n", "pkg/p.py": "y = 1\n"})
    commit = _walk(git_repo, rules=TestFileRules(file_globs=("*_spec.py",), dir_names=()))["init"]
    assert commit.stats.test_files == ["spec/parser_spec.py"] and commit.stats.source_files == ["pkg/p.py"]


def test_a_commit_touching_ten_thousand_files_is_counted_in_bounded_memory(git_repo):
    git_repo.commit("init", {"README.md": "x\n"})
    for i in range(10_000):
        path = git_repo.path / "gen" / f"m{i // 100}" / f"f{i}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"value = {i}\n")
    git_repo.git("add", "-A")
    git_repo.git("commit", "-q", "-m", "generate")
    tracemalloc.start()
    commit = _walk(git_repo)["generate"]
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert commit.stats.source_file_count == 10_000 and commit.stats.lines_added == 10_000
    assert len(commit.stats.source_files) == MAX_LISTED_FILES
    assert drop_reason(commit.stats, MiningFilters()) == "too_many_files"
    assert peak < 20 * 1024 * 1024, f"peak {peak / 1e6:.1f} MB"


def test_an_unreadable_side_counts_as_a_change(git_repo):
    sha = git_repo.commit("one", {"a.py": "x = 1\n"})
    commit = next(commits_walk(git_repo.path, sha))
    commit.python_changes = [PythonFileChange(old_path=None, new_path="gone.py", old_blob=None, new_blob=None,
                                              hunks=b"@@ -0,0 +1 @@\n+x = 1\n")]
    with BlobReader(git_repo.path) as blobs:
        assert _python_change(blobs, commit) is True


def test_runs_cut_anywhere_give_the_same_commits(git_repo):
    """git's output arrives in chunks of any size, lines longer than a run included."""
    from worker.engine.mine.walk import LOG_FORMAT, LogParser, line_runs

    git_repo.commit("init", {"pkg/a.py": "x = 1\n", "data.txt": "plain\n"})
    git_repo.commit("long line", {"pkg/a.py": "x = 2\n", "data.txt": "é" * 100_000 + "\n"})
    git_repo.commit("more", {"pkg/a.py": 'x = 3\ns = "é"\n'})
    output = subprocess.run(["git", "log", "-p", f"--format={LOG_FORMAT}", "HEAD"], cwd=git_repo.path,
                            capture_output=True, check=True).stdout

    def parsed(chunks) -> list:
        parser = LogParser(TestFileRules(), 1_000_000)
        commits = [commit for run in line_runs(chunks) for commit in parser.feed(run)] + parser.finish()
        return [(c.sha, c.stats, [(p.old_blob, p.new_blob, p.blocks) for p in c.python_changes]) for c in commits]

    whole = parsed([output])
    long_commit = next(stats for _, stats, _ in whole if "data.txt" in stats.other_files and stats.lines_added)
    assert long_commit.patch_chars == _git_show_chars(git_repo, git_repo.git("rev-parse", "HEAD~1"),
                                                      ["pkg/a.py", "data.txt"])
    for size in (1, 7, 4096, 65_537, 70_001):
        assert parsed([output[i:i + size] for i in range(0, len(output), size)]) == whole, size


def test_the_file_before_is_exact_at_the_end_of_the_file(tmp_path):
    """Hunks at the start and end, empty ranges, and a missing final newline on either side."""
    from worker.engine.mine.walk import file_before_change

    cases = [
        (b"a\nb\nc\n", b"a\nb\nc"), (b"a\nb\nc", b"a\nb\nc\n"), (b"a\nb", b"a\nc"), (b"a\nb\n", b"x\na\nb\n"),
        (b"a\nb\nc\nd\ne\nf\ng\nh\n", b"b\nc\nd\ne\nf\ng\n"), (b"", b"a\n"), (b"a\n", b"a\nb"),
        ("".join(f"{i}\n" for i in range(40)).encode(), "".join(f"{i}\n" for i in range(40) if i % 9).encode()),
    ]
    for before, after in cases:
        (tmp_path / "before").write_bytes(before)
        (tmp_path / "after").write_bytes(after)
        diff = subprocess.run(["git", "diff", "--no-index", "-U3", "before", "after"], cwd=tmp_path,
                              capture_output=True).stdout
        hunks = diff[diff.index(b"\n@@") + 1:]
        assert file_before_change(after, hunks) == before, (before, after)


def test_quoted_paths_with_escaped_quotes_are_read_whole(git_repo):
    git_repo.commit("init", {'pkg/q" x.py': "x = 1\n"})
    (git_repo.path / 'pkg/q" x.py').chmod(0o755)
    git_repo.commit("mode only", {})
    commit = _walk(git_repo)["mode only"]
    assert commit.stats.source_files == ['pkg/q" x.py'] and not commit.stats.other_files


BIG_FILE_WALK = '''
import json, resource, sys
from pathlib import Path
sys.path.insert(0, sys.argv[2])
from worker.engine.git.repo import BlobReader
from worker.engine.mine.filters import MiningFilters, drop_reason
from worker.engine.mine.walk import commits_walk, python_changes_checked

repo = Path(sys.argv[1])
tip = open(repo / ".git" / "refs" / "heads" / "main").read().strip()
with BlobReader(repo) as blobs:
    mined = list(python_changes_checked(commits_walk(repo, tip), blobs))
reasons = {commit.message.strip(): drop_reason(commit.stats, MiningFilters()) or "" for commit in mined}
# The peak of this process's own memory (ru_maxrss would count the forking parent's, from before exec).
peak_kb = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(json.dumps({"reasons": reasons, "worker_kb": peak_kb,
                  "git_kb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}))
'''


def test_a_200_mb_file_is_never_read_whole_and_its_commit_is_dropped(tmp_path):
    repo = GitRepo(tmp_path / "big")
    repo.commit("init", {"pkg/core.py": "def f():\n    return 1\n"})
    # A test file: the size filters do not count test files, so only its size can drop the commit.
    line = b"VALUE = 'a line of a generated table'\n"
    (repo.path / "tests").mkdir()
    with open(repo.path / "tests" / "test_table.py", "wb") as big:
        for _ in range((200 << 20) // len(line)):
            big.write(line)
    (repo.path / "pkg" / "core.py").write_text("def f():\n    return 3\n")
    repo.git("add", "tests/test_table.py", "pkg/core.py")
    repo.git("commit", "-q", "-m", "Add a generated table")
    repo.commit("Fix f", {"pkg/core.py": "def f():\n    return 2\n"})
    root = str(Path(__file__).resolve().parents[2])
    done = subprocess.run([sys.executable, "-c", BIG_FILE_WALK, str(repo.path), root], capture_output=True,
                          check=True, text=True)
    found = json.loads(done.stdout)
    assert found["reasons"] == {"Fix f": "", "Add a generated table": "file_too_large", "init": ""}, found
    assert found["worker_kb"] < 300 << 10 and found["git_kb"] < 300 << 10, found  # git's was 435 MB before
    print(f"peak memory: worker {found['worker_kb'] >> 10} MB, git {found['git_kb'] >> 10} MB")


def _deep_tree_repo(path: Path, levels: int) -> GitRepo:
    """A commit whose tree is nested `levels` folders deep, written by git fast-import in a moment."""
    repo = GitRepo(path)
    stream = (b"commit refs/heads/main\ncommitter A <a@example.com> 1700000000 +0000\ndata 4\nbase\n"
              b"M 100644 inline pkg/a.py\ndata 6\nx = 1\n\n"
              b"commit refs/heads/main\ncommitter A <a@example.com> 1700000001 +0000\ndata 4\ndeep\n"
              + f"M 100644 inline {'d/' * levels}m.py\n".encode() + b"data 6\nx = 1\n\n")
    subprocess.run(["git", "fast-import", "--quiet"], input=stream, cwd=path, check=True, capture_output=True)
    return repo


def test_a_tree_thousands_of_folders_deep_fails_the_working_copy_with_a_sentence(tmp_path):
    repo = _deep_tree_repo(tmp_path / "deep", 5000)
    with pytest.raises(GitError) as failed:
        working_copy_write(repo.path, repo.git("rev-parse", "main"), tmp_path / "work")
    assert str(failed.value) == ("git archive stopped on signal 11 while reading the commit's tree "
                                 "(a tree nested thousands of folders deep does this)."), failed.value
    walked = _walk(repo)  # the walk reads it (git log's warnings go to a file, not a pipe that could fill)
    assert set(walked) == {"base", "deep"}
