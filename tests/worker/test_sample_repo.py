"""The sample repository: its history, its real bugs, and what the mining filters should say.

Plain pytest: no Django, no database. Test runs inside the sample repository use
this interpreter (sys.executable) with the package importable from the checkout.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta, timezone
from fnmatch import fnmatchcase
from pathlib import Path

import pytest

from worker.demo.sample_repo import SampleCommit, sample_repo_write

NOW = datetime(2025, 6, 1, tzinfo=timezone.utc)
PROJECT_ROOT = Path(__file__).resolve().parents[2]

MAX_FILES, MAX_LINES, MAX_PATCH_CHARS = 5, 100, 2000


# ---------------------------------------------------------------- helpers


def git(repo: Path, *args: str, check: bool = True) -> bytes:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_CONFIG_GLOBAL=os.devnull, GIT_CONFIG_NOSYSTEM="1")
    result = subprocess.run(
        ["git", "-c", "core.quotepath=false", *args], cwd=repo, env=env, capture_output=True, check=False
    )
    if check and result.returncode != 0:
        raise AssertionError(f"git {args} failed: {result.stderr.decode(errors='replace')}")
    return result.stdout


def is_test_path(path: str) -> bool:
    *folders, name = path.split("/")
    if any(folder in ("test", "tests") for folder in folders):
        return True
    return any(fnmatchcase(name, glob) for glob in ("test_*.py", "*_test.py", "conftest.py"))


def parent_of(repo: Path, sha: str) -> str | None:
    parents = git(repo, "rev-list", "--parents", "-n", "1", sha).decode().split()[1:]
    return parents[0] if parents else None


def changed_files(repo: Path, sha: str) -> list[str]:
    out = git(repo, "show", "--format=", "--no-renames", "--name-only", sha).decode()
    return [line for line in out.splitlines() if line]


def _code_shape(source: bytes) -> str:
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant):
                if isinstance(body[0].value.value, str):
                    node.body = body[1:] or [ast.Pass()]
    return ast.dump(tree)


def file_at(repo: Path, rev: str | None, path: str) -> bytes:
    if rev is None:
        return b""
    return git(repo, "show", f"{rev}:{path}", check=False)


def diff_stats(repo: Path, sha: str) -> dict:
    """What the default mining filters look at, computed independently of the engine."""
    parent = parent_of(repo, sha)
    binary, non_test, lines = False, [], 0
    for row in git(repo, "show", "--format=", "--no-renames", "--numstat", sha).decode().splitlines():
        added, deleted, path = row.split("\t")
        if is_test_path(path):
            continue
        non_test.append(path)
        if added == "-":
            binary = True
        else:
            lines += int(added) + int(deleted)
    patch = git(repo, "show", "--format=", "--no-renames", "-U3", sha, "--", *non_test) if non_test else b""
    python_change = any(
        _code_shape(file_at(repo, parent, p)) != _code_shape(file_at(repo, sha, p))
        for p in non_test
        if p.endswith(".py")
    )
    return {
        "binary": binary,
        "files": len(non_test),
        "lines": lines,
        "chars": len(patch.decode("utf-8", errors="replace")),
        "python_change": python_change,
    }


def drop_reason(stats: dict) -> str | None:
    if stats["binary"]:
        return "binary_file"
    if stats["files"] > MAX_FILES:
        return "too_many_files"
    if stats["lines"] > MAX_LINES:
        return "too_many_lines"
    if stats["chars"] > MAX_PATCH_CHARS:
        return "patch_too_long"
    return None if stats["python_change"] else "no_python_change"


def worktree(repo: Path, rev: str, where: Path) -> Path:
    git(repo, "worktree", "add", "--detach", "-q", str(where), rev)
    return where


def run_env(checkout: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "PYTEST_", "DJANGO_"))}
    # None of the suite's own plugins (Django's, the browser's): a run starts in half the time.
    env.update(PYTHONPATH=str(checkout), PYTHONDONTWRITEBYTECODE="1", COLUMNS="200", PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")
    return env


_OUTCOME = re.compile(r"^(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) (\S+)", re.M)


def run_pytest(checkout: Path, *targets: str) -> dict[str, str]:
    """Node id -> outcome, for a pytest run in `checkout`."""
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", "-p", "no:django",
         "--continue-on-collection-errors", *(targets or ("tests",))],
        cwd=checkout, env=run_env(checkout), capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    outcomes = {node: outcome for outcome, node in _OUTCOME.findall(result.stdout)}
    assert outcomes, result.stdout + result.stderr
    return outcomes


def run_python(checkout: Path, code: str) -> str:
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=checkout, env=run_env(checkout), capture_output=True, text=True, timeout=60
    )
    return (result.stdout + result.stderr).strip()


# ---------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def sample(tmp_path_factory) -> tuple[Path, list[SampleCommit]]:
    repo = tmp_path_factory.mktemp("sample") / "textkit"
    return repo, sample_repo_write(repo, now=NOW)


@pytest.fixture(scope="module")
def before_after(sample, tmp_path_factory) -> dict[str, tuple[dict, dict]]:
    """For commits with declared test outcomes: pytest outcomes on parent + test files, and on the commit."""
    repo, commits = sample
    base = tmp_path_factory.mktemp("checkouts")

    git_lock = threading.Lock()  # one git process at a time on the shared repository

    def outcomes(commit: SampleCommit) -> tuple[dict, dict]:
        with git_lock:
            parent = parent_of(repo, commit.sha)
            before = worktree(repo, parent, base / f"{commit.sha[:10]}-before")
            tests = [p for p in changed_files(repo, commit.sha) if is_test_path(p)]
            if tests:
                test_patch = git(repo, "diff", parent, commit.sha, "--", *tests)
                subprocess.run(["git", "apply", "-"], cwd=before, input=test_patch, check=True)
            after = worktree(repo, commit.sha, base / f"{commit.sha[:10]}-after")
        return run_pytest(before), run_pytest(after)

    wanted = [c for c in commits if c.fail_to_pass or c.pass_to_fail]
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(outcomes, wanted))
    return {c.sha: r for c, r in zip(wanted, results)}


# ---------------------------------------------------------------- the history


def test_refuses_a_non_empty_directory(tmp_path):
    (tmp_path / "file.txt").write_text("x")
    with pytest.raises(FileExistsError):
        sample_repo_write(tmp_path)


def test_history_shape(sample):
    repo, commits = sample
    assert 30 <= len(commits) <= 45
    assert git(repo, "rev-list", "--count", "main").decode().strip() == str(len(commits))
    assert git(repo, "symbolic-ref", "HEAD").decode().strip() == "refs/heads/main"
    assert [c.sha for c in commits] == git(repo, "rev-list", "--reverse", "main").decode().split()
    kinds = Counter(c.kind for c in commits)
    assert kinds["initial"] == 1 and commits[0].kind == "initial"
    for kind in ("docs_only", "fix_without_test", "refactor_large", "weak_oracle_fix", "flaky_test",
                 "breaks_other_test", "binary_asset", "non_utf8_fix", "docstring_only", "feature"):  # fmt: skip
        assert kinds[kind] >= 1, kind
    kept_fixes = [c for c in commits if c.kind == "fix_with_test" and c.expected_drop_reason is None]
    assert len(kept_fixes) >= 8
    assert all(c.fail_to_pass for c in kept_fixes)
    reasons = {c.expected_drop_reason for c in commits if c.kind == "refactor_large"}
    assert {"too_many_files", "too_many_lines", "patch_too_long"} <= reasons
    assert all(isinstance(c, SampleCommit) and len(c.sha) == 40 for c in commits)


def test_dates_and_authors(sample):
    repo, commits = sample
    log = git(repo, "log", "--reverse", "--format=%at %ct %an <%ae>").decode().splitlines()
    author_times = [int(line.split()[0]) for line in log]
    committer_times = [int(line.split()[1]) for line in log]
    assert author_times == committer_times
    assert all(a < b for a, b in zip(author_times, author_times[1:]))
    earliest = (NOW - timedelta(days=365 * 2)).timestamp()
    assert earliest < author_times[0] and author_times[-1] < NOW.timestamp()
    assert author_times[-1] - author_times[0] > 365 * 86400  # spread over more than a year
    assert len({line.split(" ", 2)[2] for line in log}) >= 3


def test_default_now_is_today_and_shas_are_stable(tmp_path):
    first = sample_repo_write(tmp_path / "a")
    second = sample_repo_write(tmp_path / "b")
    assert [c.sha for c in first] == [c.sha for c in second]
    newest = int(git(tmp_path / "a", "log", "-1", "--format=%at").decode())
    today = datetime.now(timezone.utc).replace(hour=0, minute=0, second=0, microsecond=0)
    assert today - timedelta(days=730) < datetime.fromtimestamp(newest, timezone.utc) < today


def test_library_stays_small(sample):
    repo, _ = sample
    files = git(repo, "ls-files").decode().split()
    source = [f for f in files if f.startswith("textkit/") and f.endswith(".py")]
    assert sum(len(file_at(repo, "HEAD", f).splitlines()) for f in source) < 1500
    assert "pyproject.toml" in files and "README.md" in files
    assert any(f.startswith("docs/") for f in files)
    pyproject = file_at(repo, "HEAD", "pyproject.toml").decode()
    assert 'requires-python = ">=3.9"' in pyproject and "dependencies = []" in pyproject


def test_expected_drop_reasons_match_the_diff(sample):
    repo, commits = sample
    for commit in commits:
        stats = diff_stats(repo, commit.sha)
        where = f"{commit.kind} {commit.subject!r}: {stats}"
        assert drop_reason(stats) == commit.expected_drop_reason, where
        # Robust, not borderline: another way of counting must not flip the outcome.
        if commit.expected_drop_reason in (None, "no_python_change"):
            assert stats["files"] <= 4 and stats["lines"] <= 75 and stats["chars"] <= 1600, where
        elif commit.expected_drop_reason == "too_many_lines":
            assert stats["files"] <= MAX_FILES and stats["lines"] >= 120, where
        elif commit.expected_drop_reason == "patch_too_long":
            assert stats["files"] <= MAX_FILES and stats["lines"] <= 80 and stats["chars"] >= 2400, where


def test_binary_and_non_utf8_commits(sample):
    repo, commits = sample
    (binary,) = [c for c in commits if c.kind == "binary_asset"]
    numstat = git(repo, "show", "--format=", "--numstat", binary.sha).decode()
    assert "-\t-\tdocs/logo.png" in numstat
    (latin1,) = [c for c in commits if c.kind == "non_utf8_fix"]
    message = git(repo, "log", "-1", "--format=%B", latin1.sha)
    assert b"caf\xe9" in message
    with pytest.raises(UnicodeDecodeError):
        message.decode("utf-8")
    assert "café" in latin1.subject
    assert b"caf\xe9" in file_at(repo, latin1.sha, "tests/data/menu-latin1.csv")
    assert "-\t-" not in git(repo, "show", "--format=", "--numstat", latin1.sha).decode()


# ---------------------------------------------------------------- the bugs are real


def test_fail_to_pass_and_pass_to_fail(sample, before_after):
    repo, commits = sample
    flaky_anywhere = {node for commit in commits for node in commit.flaky}
    for commit in commits:
        if commit.sha not in before_after:
            continue
        before, after = before_after[commit.sha]
        where = f"{commit.kind} {commit.subject!r}"
        for node in commit.fail_to_pass:
            assert before.get(node) != "PASSED", f"{where}: {node} passes before"
            assert after.get(node) == "PASSED", f"{where}: {node} does not pass after"
        touched = set(changed_files(repo, commit.sha))
        for node in commit.pass_to_fail:
            assert node.split("::")[0] not in touched, where
            assert before.get(node) == "PASSED", f"{where}: {node} does not pass before"
            assert after.get(node) == "FAILED", f"{where}: {node} does not fail after"
        # Nothing else breaks: what passed before passes after, flaky tests aside.
        broken = {n for n, o in before.items() if o == "PASSED" and after.get(n) != "PASSED"}
        assert broken <= set(commit.pass_to_fail) | flaky_anywhere, f"{where}: {broken}"


def test_fix_with_test_kinds_all_checked(sample, before_after):
    _, commits = sample
    for commit in commits:
        if commit.kind in ("fix_with_test", "weak_oracle_fix", "non_utf8_fix", "breaks_other_test", "flaky_test"):
            assert commit.sha in before_after and commit.fail_to_pass, commit.subject
        if commit.kind == "breaks_other_test":
            assert commit.pass_to_fail


def test_fixes_without_tests_change_behaviour(sample, tmp_path):
    repo, commits = sample
    fixes = [c for c in commits if c.kind == "fix_without_test"]
    assert len(fixes) >= 3
    probes = {
        "slugify: no trailing": ("from textkit.slug import slugify; print(slugify('hello big world', max_length=10))", "hello-big-", "hello-big"),
        "LRUCache.put": ("from textkit.cache import LRUCache\nc = LRUCache(2); c.put('a', 1); c.put('b', 2); c.put('b', 3); print(sorted(c._data))", "['b']", "['a', 'b']"),
        "parse_duration: round": ("from textkit.durations import parse_duration; print(parse_duration('1.13h'))", "4067", "4068"),
        "parse_version: accept": ("from textkit.semver import compare_versions; print(compare_versions('v1.2.3', '1.2.3'))", "not a semantic version", "0"),
    }  # fmt: skip
    for commit in fixes:
        assert not any(is_test_path(p) for p in changed_files(repo, commit.sha)), commit.subject
        (code, old, new) = next(v for k, v in probes.items() if commit.subject.startswith(k))
        before = run_python(worktree(repo, parent_of(repo, commit.sha), tmp_path / f"{commit.sha[:8]}-b"), code)
        after = run_python(worktree(repo, commit.sha, tmp_path / f"{commit.sha[:8]}-a"), code)
        assert old in before and after == new, (commit.subject, before, after)


def test_weak_oracle_never_checks_the_value(sample, tmp_path):
    repo, commits = sample
    (weak,) = [c for c in commits if c.kind == "weak_oracle_fix"]
    (node,) = weak.fail_to_pass
    path, name = node.split("::")
    tree = ast.parse(file_at(repo, weak.sha, path))
    (function,) = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name]
    assert not any(isinstance(n, ast.Assert) for n in ast.walk(function))
    # The fixed function is still wrong elsewhere: a stronger test would catch it.
    checkout = worktree(repo, weak.sha, tmp_path / "weak")
    assert run_python(checkout, "from textkit.durations import parse_duration; print(parse_duration('1.13h'))") == "4067"


def test_flaky_test_changes_outcome(sample, tmp_path):
    repo, commits = sample
    (flaky,) = [c for c in commits if c.kind == "flaky_test"]
    (node,) = flaky.flaky
    checkout = worktree(repo, flaky.sha, tmp_path / "flaky")
    with ThreadPoolExecutor(max_workers=2) as pool:
        runs = list(pool.map(lambda _: run_pytest(checkout, node).get(node), range(16)))
    assert set(runs) == {"PASSED", "FAILED"}, runs


def test_head_is_green(sample, tmp_path):
    repo, _ = sample
    outcomes = run_pytest(worktree(repo, "HEAD", tmp_path / "head"))
    assert len(outcomes) >= 30
    assert set(outcomes.values()) == {"PASSED"}, outcomes


def test_command_line(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "worker.demo.sample_repo", str(tmp_path / "cli")],
        cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == int(git(tmp_path / "cli", "rev-list", "--count", "main"))
    sha, kind, subject = lines[0].split("\t")
    assert len(sha) == 40 and kind == "initial" and subject.startswith("Initial commit")
