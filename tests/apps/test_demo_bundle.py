"""What the demo bundles (worker/demo/data/) tells the truth about the sample repository it is for:
its instance ids are the sample's tasks, each run's report says what the hidden tests say of each
candidate, each recorded reproduction test fails before the fix and passes after it, and each
recorded issue text would reach the review queue (not degenerate, not giving the fix away).

The sample's own code runs here with pytest, outside a sandbox: it is the demo's, not a user's."""

import os
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from worker.demo.bundle import demo_bundle, demo_sample_write
from worker.demo.history import git, git_env
from worker.engine.grade.swebench import predictions_read, report_read
from worker.engine.llm.issue_writer import degeneration, issue_text, leak_check
from worker.engine.validate.generated_tests import generated_files_from_answer

LEAK_THRESHOLD = 0.3  # COMMITGYM_LEAK_THRESHOLD's default


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    """(the sample as the demo writes it, {instance id: its commit})."""
    path = tmp_path_factory.mktemp("demo-sample") / "textkit"
    commits = demo_sample_write(path)
    return path, {f"demo__textkit-{commit.sha[:10]}": commit for commit in commits}


def _checkout(repo: Path, folder: Path, sha: str, *, tests_from: str = "", patch: str = "",
              files: dict | None = None) -> Path:
    """The repository at `sha`, with the test files of `tests_from`, `patch` applied and `files` added."""
    env = git_env()
    git(repo, "worktree", "add", "-q", "--detach", str(folder), sha, env=env)
    if tests_from:
        changed = git(repo, "show", "--name-only", "--format=", tests_from, env=env).split()
        git(folder, "checkout", tests_from, "--", *[path for path in changed if path.startswith("tests/")], env=env)
    if patch:
        git(folder, "apply", "-", env=env, stdin=patch.encode())
    for name, text in (files or {}).items():
        (folder / name).write_text(text)
    return folder


def _passing(folder: Path, *paths: str) -> dict[str, bool]:
    """{test id: passed} of a pytest run of `paths` (default: the suite) in `folder`."""
    report = folder / "report.xml"
    env = {**{name: value for name, value in os.environ.items() if not name.startswith(("DJANGO", "PYTEST"))},
           "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}  # none of the suite's plugins (Django's, the browser's)
    ran = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          f"--junitxml={report}", *(paths or ("tests",))], cwd=folder, env=env, capture_output=True,
                         text=True, timeout=120)
    assert report.exists(), ran.stdout + ran.stderr
    return {f"{case.get('file') or case.get('classname').replace('.', '/') + '.py'}::{case.get('name')}":
            not any(child.tag in ("failure", "error") for child in case)
            for case in ElementTree.parse(report).iter("testcase")}


def test_the_bundles_instance_ids_are_the_samples_tasks_with_fail_to_pass_tests(sample):
    _, commits = sample
    bundle = demo_bundle()
    assert len(bundle.instance_ids) == 3 and set(bundle.instance_ids) == set(bundle.reproduction_answers)
    assert all(commits[instance_id].fail_to_pass and commits[instance_id].expected_drop_reason is None
               for instance_id in bundle.instance_ids)
    assert [run.name for run in bundle.runs] == ["demo-agent-a", "demo-agent-b", "demo-agent-c", "demo-agent-d"]
    for run in bundle.runs:
        found = predictions_read(run.predictions, run=run.name)
        assert not found.refused and not found.unreadable
        assert sorted(prediction.instance_id for prediction in found.kept.values()) == bundle.instance_ids
        assert report_read(run.report).shape == "run_report"


def test_each_report_says_what_the_hidden_tests_say_of_each_candidate(sample, tmp_path):
    """Resolved exactly when every test that passes with the task's own fix passes with the candidate."""
    repo, commits = sample
    bundle = demo_bundle()
    gold = {instance_id: _passing(_checkout(repo, tmp_path / instance_id, commits[instance_id].sha))
            for instance_id in bundle.instance_ids}
    cases = [(run, prediction) for run in bundle.runs
             for prediction in predictions_read(run.predictions, run=run.name).kept.values()]

    def resolved(case) -> bool:
        run, prediction = case
        sha = commits[prediction.instance_id].sha
        folder = _checkout(repo, tmp_path / f"{run.name}-{prediction.instance_id}", f"{sha}^", tests_from=sha,
                           patch=prediction.patch)
        passing = _passing(folder)
        return all(passing.get(test) for test, passed in gold[prediction.instance_id].items() if passed)

    with ThreadPoolExecutor(max_workers=2) as pool:
        found = dict(zip([(run.name, p.instance_id) for run, p in cases], pool.map(resolved, cases)))
    reported = {(run.name, instance_id): outcome == "resolved" for run in bundle.runs
                for instance_id, outcome in report_read(run.report).outcomes.items()}
    assert reported == found
    assert 0 < sum(found.values()) < len(found)  # right and wrong candidates both


def test_each_recorded_reproduction_test_fails_before_the_fix_and_passes_after(sample, tmp_path):
    repo, commits = sample
    for instance_id, answer in demo_bundle().reproduction_answers.items():
        (test_file,) = generated_files_from_answer(answer)
        files = {"test_commitgym_reproduction_0.py": test_file}
        sha = commits[instance_id].sha
        before = _passing(_checkout(repo, tmp_path / f"{instance_id}-before", f"{sha}^", files=files),
                          "test_commitgym_reproduction_0.py")
        after = _passing(_checkout(repo, tmp_path / f"{instance_id}-after", sha, files=files),
                         "test_commitgym_reproduction_0.py")
        assert before and not any(before.values()), (instance_id, before)
        assert after and all(after.values()), (instance_id, after)


def test_each_recorded_issue_would_reach_the_review_queue_without_giving_the_fix_away(sample):
    repo, commits = sample
    for instance_id, answer in demo_bundle().issues.items():
        text, commit = issue_text(answer), commits[instance_id]
        assert text and not degeneration(text).degenerate, instance_id
        source_patch = git(repo, "diff", f"{commit.sha}^", commit.sha, "--", "textkit", env=git_env())
        leak = leak_check(text, source_patch=source_patch, fail_to_pass=list(commit.fail_to_pass))
        assert leak.score <= LEAK_THRESHOLD, (instance_id, leak)

