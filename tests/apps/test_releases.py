"""Releases and training exports (apps/datasets/releases.py): what a version holds, that versions
are never written twice, previews, --since, withdrawing, the round trip through import_instances,
and the refusals a person can cause."""

import json
import re
import shutil
from datetime import date, timedelta
from pathlib import Path

import pyarrow.parquet
import pytest
from django.urls import reverse
from django.utils import timezone

from apps.datasets.candidates.imports import instances_import
from apps.datasets.models import Candidate, Dataset, Release, Run
from apps.datasets.releases import (
    ReleaseRefused,
    export_start,
    release_start,
    release_withdraw,
    scope_of_dataset,
    scope_of_repository,
)
from apps.environments.models import Environment
from apps.jobs.models import Job
from apps.jobs.services import job_run
from apps.repositories.models import Commit, Repository
from apps.tasks import review
from apps.tasks.models import GeneratedTest, ImportedInstance, IssueVersion, SavedView, Task, Validation
from tests.conftest import task_put_in_review
from worker.engine.release.records import OWN_FIELDS, SWEBENCH_FIELDS
from worker.engine.release.writers import file_sha256, files_check

pytestmark = pytest.mark.django_db

ACCEPT = review.ReviewForm(decision="accept", underspecified=0, false_negative=1, difficulty="<15 min fix")
F2P, P2P = "tests/test_calc.py::test_add", "tests/test_other.py::test_ok"


@pytest.fixture
def accepted(small_repository, curator, tmp_path):
    """The small repository's fix, validated in an environment, with an issue, accepted."""
    task = Task.objects.filter(repository=small_repository).exclude(commit__parent_sha="").get()
    task_put_in_review(task, fail_to_pass=(F2P,), pass_to_pass=(P2P,), issue="add() returns the difference")
    environment = Environment.objects.create(key="e" * 64, python_version="3.11.7", lock="pytest==8.3.3\n",
                                             path=str(tmp_path / "env"), strategy="uv pip install -e .",
                                             suite_args=["-p", "no:randomly"])
    Validation.objects.filter(task=task).update(environment=environment)
    assert review.task_review_submit(task=task, user=curator, form=ACCEPT) == "accepted"
    task.refresh_from_db()
    return task


def released(name="calc", *, scope, states=("accepted",), since=None, out=None, user=None) -> Release:
    """A release asked for and written here, as a worker would."""
    release = release_start(name=name, scope=scope, states=states, since=since, out=out, user=user)
    job_run(job_id=release.job_id)
    release.refresh_from_db()
    assert release.state == Job.State.SUCCEEDED, release.job.error_message
    return release


@pytest.fixture(autouse=True)
def no_index(settings):
    """The index's hashes are read end to end (test_release_e2e.py); here no index answers."""
    settings.COMMITGYM_INDEX_URL = "http://127.0.0.1:9/simple/"


def rows_of(release: Release) -> list[dict]:
    return [json.loads(line) for line in (Path(release.folder) / "instances.jsonl").read_text().splitlines()]


def test_a_release_holds_swebench_rows_the_same_rows_in_parquet_and_a_manifest(accepted, small_repository,
                                                                                 tmp_path, settings):
    settings.COMMITGYM_RELEASE_DIR = tmp_path / "releases"
    release = released(scope=scope_of_repository(small_repository))
    assert (str(release), release.task_count, release.preview) == ("calc@1", 1, False)
    assert Path(release.folder) == tmp_path / "releases" / "calc@1"
    [row] = rows_of(release)
    assert list(row) == [*SWEBENCH_FIELDS, *OWN_FIELDS]
    assert release.manifest["uid"] == str(release.uid)
    commit = accepted.commit
    assert row["instance_id"] == accepted.instance_id and row["base_commit"] == commit.parent_sha
    assert row["repo"] == "local/project" and row["problem_statement"] == "add() returns the difference"
    assert "lib/calc.py" in row["patch"] and "tests/" not in row["patch"]
    assert "tests/test_calc.py" in row["test_patch"] and "lib/calc.py" not in row["test_patch"]
    # The test lists as JSON strings, as SWE-bench's own dataset stores them.
    assert (row["FAIL_TO_PASS"], row["PASS_TO_PASS"]) == (json.dumps([F2P]), json.dumps([P2P]))
    assert row["created_at"] == commit.committed_at.strftime("%Y-%m-%dT%H:%M:%SZ")
    # The environment was built by this task's own validation: its base is where it was set up.
    assert row["version"] == "e" * 12 and row["environment_setup_commit"] == commit.parent_sha
    assert row["commitgym_test_command"] == "python -m pytest -rA -p no:cacheprovider -p no:randomly"
    assert (row["commitgym_python_version"], row["commitgym_lock"]) == ("3.11.7", "pytest==8.3.3\n")
    assert (row["commitgym_underspecified"], row["commitgym_false_negative"], row["commitgym_difficulty"]) == (
        0, 1, "<15 min fix")
    assert pyarrow.parquet.read_table(Path(release.folder) / "instances.parquet").to_pylist() == [row]

    manifest = json.loads((Path(release.folder) / "manifest.json").read_text())
    assert manifest == release.manifest
    assert (manifest["release"], manifest["version"], manifest["preview"]) == ("calc", 1, False)
    assert manifest["scope"] == {"kind": "repository", "name": small_repository.name}
    assert manifest["counts"]["tasks"] == 1 and manifest["counts"]["fail_to_pass_tests"] == 1
    assert manifest["sources"]["commit_dates"]["first"] == commit.committed_at.date().isoformat()
    assert manifest["rules"]["curation"]["required_reviews"] == 1
    assert manifest["rules"]["mining_filters"][small_repository.name]["max_files"] == small_repository.max_files
    # Every file's checksum is in the manifest; the manifest's own where the release is recorded.
    # The repository at the task's base commit rides along as a source archive (this one has no licence file).
    archive = f"sources/{small_repository.name.replace('/', '__')}-{commit.parent_sha}.tar.gz"
    environment = f"environments/{'e' * 64}"
    assert [file["name"] for file in release.files] == [
        "instances.jsonl", "instances.parquet", archive, f"{environment}/Dockerfile",
        f"{environment}/requirements.lock", f"{environment}/tasks", f"{environment}/generated",
        f"{environment}/zz_commitgym_working_copy.pth", f"{environment}/uv_fetch.py", "README.md", "manifest.json"]
    # Each environment its tasks use, as files a stranger builds it from (its own test builds one).
    [entry] = manifest["environments"]
    assert (entry["key"], entry["tasks"], entry["setup_commit"], entry["lock"]) == (
        "e" * 64, [accepted.instance_id], commit.parent_sha, f"{environment}/requirements.lock")
    assert entry["lock_sha256"] == file_sha256(Path(release.folder) / entry["lock"]) and entry["image_id"] is None
    assert (Path(release.folder) / entry["lock"]).read_text() == "pytest==8.3.3\n"
    [unhashed] = entry["lock_unhashed"]
    assert unhashed.startswith("the index http://127.0.0.1:9/simple/ could not be read") and "no hashes" in unhashed
    assert (Path(release.folder) / environment / "tasks").read_text() == f"{accepted.instance_id} {archive}\n"
    assert (Path(release.folder) / "extra-ca.crt").read_text() == "" and manifest["tasks_without_environment"] == 0
    assert manifest["licences"] == {small_repository.name: {"commit": commit.parent_sha, "files": [],
                                                            "why": "none found"}}
    for file in release.files:
        assert file_sha256(Path(release.folder) / file["name"]) == file["sha256"]
    assert manifest["files"] == release.files[:-1] and files_check(Path(release.folder), release.files) == []


def test_nothing_changed_makes_no_version_and_a_change_makes_the_next(accepted, small_repository, tmp_path, settings,
                                                                       curator):
    settings.COMMITGYM_RELEASE_DIR = tmp_path / "releases"
    first = released(scope=scope_of_repository(small_repository))
    again = released(scope=scope_of_repository(small_repository))
    assert again.version is None and again.same_as == first and again.files == []
    assert sorted(path.name for path in (tmp_path / "releases").iterdir()) == ["calc@1"]
    # An edited issue is a change (the accepted task goes back to review: accept it again).
    IssueVersion.objects.create(task=accepted, number=2, author="person", text="add(2, 3) gives -1")
    Task.objects.filter(id=accepted.id).update(state="accepted")
    second = released(scope=scope_of_repository(small_repository))
    assert str(second) == "calc@2" and rows_of(second)[0]["problem_statement"] == "add(2, 3) gives -1"
    assert rows_of(first)[0]["problem_statement"] == "add() returns the difference"


def test_a_withdrawn_version_is_kept_and_its_number_never_written_again(accepted, small_repository, tmp_path,
                                                                         settings, curator):
    settings.COMMITGYM_RELEASE_DIR = tmp_path / "releases"
    first = released(scope=scope_of_repository(small_repository))
    before = {file: file.read_bytes() for file in Path(first.folder).rglob("*") if file.is_file()}
    with pytest.raises(ReleaseRefused, match="say why"):
        release_withdraw(release=first, user=curator, reason="  ")
    release_withdraw(release=first, user=curator, reason="the oracle of one task is wrong")
    with pytest.raises(ReleaseRefused, match="withdrawn already"):
        release_withdraw(release=first, user=curator, reason="again")
    # The same rows again: a new number, the withdrawn files as they were.
    second = released(scope=scope_of_repository(small_repository))
    assert str(second) == "calc@2" and rows_of(second) == rows_of(first)
    assert {file: file.read_bytes() for file in Path(first.folder).rglob("*") if file.is_file()} == before
    first.refresh_from_db()
    assert first.withdrawn_reason == "the oracle of one task is wrong" and first.withdrawn_by == curator
    with pytest.raises(ReleaseRefused, match="withdrawn: export from a current version"):
        export_start(release=first, kind="judge")
    assert [str(one) for one in Release.objects.filter(name="calc").exclude(version=None)] == ["calc@2", "calc@1"]


def test_a_preview_release_holds_tasks_in_review_and_says_so(accepted, small_repository, tmp_path, settings,
                                                             curator_client):
    settings.COMMITGYM_RELEASE_DIR = tmp_path / "releases"
    with pytest.raises(ReleaseRefused, match="is needs_review: nothing to release"):
        release_start(name="calc", scope=scope_of_repository(small_repository), states=("needs_review",))
    Task.objects.filter(id=accepted.id).update(state="needs_review")
    preview = released(scope=scope_of_repository(small_repository), states=("accepted", "needs_review"))
    assert preview.preview and preview.manifest["preview"] and preview.manifest["states"] == ["needs_review",
                                                                                                "accepted"]
    assert preview.manifest["counts"]["states"] == {"needs_review": 1}
    page = curator_client.get(reverse("datasets:release", args=[preview.id])).content.decode()
    assert "Preview" in page and "needs_review" in page


def test_since_keeps_tasks_whose_commit_is_newer_and_the_manifest_says_so(accepted, small_repository, tmp_path,
                                                                          settings):
    settings.COMMITGYM_RELEASE_DIR = tmp_path / "releases"
    when = accepted.commit.committed_at.date()
    with pytest.raises(ReleaseRefused, match=f"with a commit after {when}: nothing to release"):
        release_start(name="fresh", scope=scope_of_repository(small_repository), since=when)
    release = released("fresh", scope=scope_of_repository(small_repository), since=when - timedelta(days=1))
    assert release.task_count == 1 and release.manifest["since"] == (when - timedelta(days=1)).isoformat()
    # An older commit is left out.
    Commit.objects.filter(id=accepted.commit_id).update(committed_at=timezone.now() - timedelta(days=400))
    with pytest.raises(ReleaseRefused, match="nothing to release"):
        release_start(name="fresh", scope=scope_of_repository(small_repository),
                      since=date.today() - timedelta(days=30))


def test_a_release_round_trips_through_import_instances(accepted, small_repository, tmp_path, settings):
    settings.COMMITGYM_RELEASE_DIR = tmp_path / "releases"
    release = released(scope=scope_of_repository(small_repository))
    jsonl = tmp_path / "calc.jsonl"
    shutil.copy(Path(release.folder) / "instances.jsonl", jsonl)
    [row] = rows_of(release)
    # Into the same database: refused, with why, as any import of an existing instance id is.
    same = instances_import(path=jsonl)
    assert same.refused == [{"row": 1, "instance_id": row["instance_id"],
                             "reason": f"{row['instance_id']} is a task mined from {small_repository.name}: "
                                       "instance ids are unique"}]
    # Into a fresh database: the task field for field.
    Release.objects.all().delete()
    Dataset.objects.all().delete()
    Repository.objects.all().delete()
    assert not Task.objects.exists()
    imported = instances_import(path=jsonl)
    assert imported.refused == [] and imported.counts["created"] == 1
    instance = ImportedInstance.objects.select_related("task__commit", "task__repository").get()
    task = instance.task
    assert (task.instance_id, task.repository.name, task.commit.sha) == (row["instance_id"], row["repo"],
                                                                        row["base_commit"])
    assert (instance.patch, instance.test_patch, instance.hints_text, instance.created_at, instance.version,
            instance.environment_setup_commit) == (row["patch"], row["test_patch"], row["hints_text"],
                                                   row["created_at"], row["version"], row["environment_setup_commit"])
    assert (json.dumps(instance.fail_to_pass), json.dumps(instance.pass_to_pass)) == (row["FAIL_TO_PASS"],
                                                                                      row["PASS_TO_PASS"])
    assert IssueVersion.objects.get(task=task).text == row["problem_statement"]
    # Released again from there, the SWE-bench fields are what they were.
    again = released("calc-imported", scope=scope_of_dataset(Dataset.objects.get(name="calc")), states=("valid",))
    assert [{key: value for key, value in one.items() if key in SWEBENCH_FIELDS} for one in rows_of(again)] == [
        {key: value for key, value in row.items() if key in SWEBENCH_FIELDS}]


def test_what_cannot_be_released_is_refused_at_once_with_why(accepted, small_repository, tmp_path, settings):
    settings.COMMITGYM_RELEASE_DIR = tmp_path / "releases"
    scope = scope_of_repository(small_repository)
    for name in ("", "a/b", "x@1", "-dash", "n" * 101):
        with pytest.raises(ReleaseRefused, match="cannot name a release"):
            release_start(name=name, scope=scope)
    with pytest.raises(ReleaseRefused, match="unknown task state finished: choose from mined"):
        release_start(name="calc", scope=scope, states=("accepted", "finished"))
    (tmp_path / "a-file").write_text("")
    with pytest.raises(ReleaseRefused, match="is a file, not a folder"):
        release_start(name="calc", scope=scope, out=tmp_path / "a-file")
    asked = release_start(name="calc", scope=scope)
    with pytest.raises(ReleaseRefused, match=f"being written already \\(job {asked.job_id}\\)"):
        release_start(name="calc", scope=scope)
    assert Release.objects.count() == 1


def test_a_release_streams_in_chunks_with_progress(small_repository, tmp_path, settings, monkeypatch):
    """A release of more tasks than a chunk reports its progress chunk by chunk on its job."""
    from apps.datasets import releases
    from tests.conftest import commits_and_tasks_make

    settings.COMMITGYM_RELEASE_DIR = tmp_path / "releases"
    monkeypatch.setattr(releases, "CHUNK", 2)
    tasks = commits_and_tasks_make(small_repository, 5)
    for task in tasks:
        IssueVersion.objects.create(task=task, number=1, author="person", text=f"issue of {task.instance_id}")
    Task.objects.filter(id__in=[task.id for task in tasks]).update(state="accepted")
    # Their commits are made up (no git history): the release reads patches of real commits only.
    monkeypatch.setattr(releases, "_patches", lambda tasks: {})
    seen = []
    original = releases.JsonLines.write
    monkeypatch.setattr(releases.JsonLines, "write", lambda self, rows: (
        seen.append(Job.objects.get(kind="release").progress_done), original(self, rows))[1])
    release = released("many", scope=scope_of_repository(small_repository))
    assert release.task_count == 5 and seen == [0, 2, 4]
    assert (release.job.progress_done, release.job.progress_total) == (5, 5)
    assert [row["instance_id"] for row in rows_of(release)] == sorted(task.instance_id for task in tasks)


def test_exports_hold_successful_trajectories_and_labelled_patches(accepted, small_repository, tmp_path, settings):
    settings.COMMITGYM_RELEASE_DIR = tmp_path / "releases"
    release = released(scope=scope_of_repository(small_repository))
    steps = [{"step": 1, "thought": "Look at add", "action": "cat lib/calc.py", "observation": "return a - b"},
             {"step": 2, "thought": "", "action": "submit", "observation": ""}]
    run = Run.objects.create(name="agent-x")
    right = Candidate.objects.create(task=accepted, source="import", run=run, kind="agent-x", patch="right",
                                     outcome="resolved", outcome_source="graded", trajectory=steps)
    wrong = Candidate.objects.create(task=accepted, source="mutant", kind="flip_comparison", patch="wrong",
                                     outcome="no", outcome_source="graded")
    Candidate.objects.create(task=accepted, source="import", run=Run.objects.create(name="y"), kind="y", patch="p",
                             outcome="timeout", outcome_source="graded")
    Candidate.objects.create(task=accepted, source="empty", kind="empty", outcome="no", outcome_source="graded")

    trajectories = export_start(release=release, kind="trajectories")
    job_run(job_id=trajectories.job_id)
    trajectories.refresh_from_db()
    assert trajectories.state == Job.State.SUCCEEDED, trajectories.job.error_message
    [row] = [json.loads(line) for line in (Path(trajectories.folder) / "trajectories.jsonl").read_text().splitlines()]
    assert (row["instance_id"], row["candidate_id"], row["run"], row["patch"]) == (accepted.instance_id, right.id,
                                                                                  "agent-x", "right")
    assert [message["role"] for message in row["messages"]] == ["system", "user", "assistant", "user", "assistant"]
    assert row["messages"][1]["content"] == "add() returns the difference"
    assert row["messages"][2]["content"] == "Look at add\n\n```\ncat lib/calc.py\n```"
    assert Path(trajectories.folder).parent == Path(f"{release.folder}.exports")

    judge = export_start(release=release, kind="judge")
    job_run(job_id=judge.job_id)
    judge.refresh_from_db()
    rows = [json.loads(line) for line in (Path(judge.folder) / "judge.jsonl").read_text().splitlines()]
    assert [(row["candidate_id"], row["label"], row["label_source"]) for row in rows] == [
        (right.id, True, "hidden_tests:graded"), (wrong.id, False, "hidden_tests:graded")]
    assert rows[0]["trajectory"] == steps and rows[1]["trajectory"] is None
    assert judge.manifest["counts"] == {"right": 1, "wrong": 1} and judge.manifest["release"] == "calc@1"
    assert files_check(Path(judge.folder), judge.files) == []


def test_the_oracle_released_leaves_out_dropped_tests_and_carries_the_generated_tests_it_rests_on(
        accepted, small_repository, tmp_path, settings):
    settings.COMMITGYM_RELEASE_DIR = tmp_path / "releases"
    Task.objects.filter(id=accepted.id).update(excluded_tests=[P2P])
    # A validation of generated tests (the commit's own found nothing): its kept file joins the test patch.
    generated = "test_commitgym_generated_1.py"
    validation = Validation.objects.get(task=accepted)
    Validation.objects.filter(id=validation.id).update(generated=True, fail_to_pass=[f"{generated}::test_add"])
    GeneratedTest.objects.create(task=accepted, validation=validation, index=0, path=generated, state="kept",
                                 content="def test_add():\n    assert True\n")
    GeneratedTest.objects.create(task=accepted, validation=validation, index=1, path="test_commitgym_generated_2.py",
                                 state="dropped", content="def test_no():\n    assert False\n")
    [row] = rows_of(released(scope=scope_of_repository(small_repository)))
    assert (row["FAIL_TO_PASS"], row["PASS_TO_PASS"]) == (json.dumps([f"{generated}::test_add"]), "[]")
    assert f"+++ b/{generated}" in row["test_patch"] and "generated_2" not in row["test_patch"]
    assert "tests/test_calc.py" in row["test_patch"]


def test_a_saved_view_releases_what_it_matched_when_asked(accepted, small_repository, curator, tmp_path, settings):
    from apps.datasets.releases import scope_of_view
    from apps.tasks.views.common import saved_view_task_ids

    settings.COMMITGYM_RELEASE_DIR = tmp_path / "releases"
    view = SavedView.objects.create(user=curator, name="fresh fixes", query="q=Fix")
    release = released("fresh", scope=scope_of_view(view, saved_view_task_ids(view=view, user=curator)))
    assert release.task_ids == [accepted.id] and release.manifest["scope"] == {"kind": "view", "name": "fresh fixes"}
    nothing = SavedView.objects.create(user=curator, name="nothing", query="q=no-such-text")
    with pytest.raises(ReleaseRefused, match="no task of the saved view 'nothing' is accepted"):
        release_start(name="none", scope=scope_of_view(nothing, saved_view_task_ids(view=nothing, user=curator)))


def test_a_folder_in_the_way_stops_the_release_and_is_never_removed(accepted, small_repository, tmp_path, settings):
    settings.COMMITGYM_RELEASE_DIR = tmp_path / "releases"
    foreign = tmp_path / "releases" / "calc@1"
    foreign.mkdir(parents=True)
    (foreign / "manifest.json").write_text('{"release": "calc", "version": 1, "uid": "someone-else"}')
    release = release_start(name="calc", scope=scope_of_repository(small_repository))
    job_run(job_id=release.job_id)
    release.refresh_from_db()
    assert release.state == Job.State.FAILED and release.job.error_code == "release_folder_taken"
    assert "exists and is not this release's" in release.job.error_message
    assert (foreign / "manifest.json").read_text().endswith('"someone-else"}')
    assert [path.name for path in (tmp_path / "releases").iterdir()] == ["calc@1"]  # no attempt's folder left


def test_releases_are_seen_only_by_those_who_see_their_repositories(accepted, small_repository, tmp_path, settings,
                                                                     curator_client, annotator_client):
    from django.contrib.auth.models import Group

    settings.COMMITGYM_RELEASE_DIR = tmp_path / "releases"
    release = released(scope=scope_of_repository(small_repository))
    file_page = reverse("datasets:release_file", args=[release.pk, "instances.jsonl"])
    assert curator_client.get(file_page).status_code == 200
    for name in ("..%2F..%2Fetc%2Fpasswd", "%2Fetc%2Fpasswd", "passwd", ".commitgym"):
        assert curator_client.get(f"/releases/{release.pk}/files/{name}").status_code == 404
    small_repository.allowed_groups.add(Group.objects.get_or_create(name="team-a")[0])
    for page in (reverse("datasets:release", args=[release.pk]), file_page):
        assert annotator_client.get(page).status_code == 404
    assert "calc@1" not in annotator_client.get(reverse("datasets:releases")).content.decode()
    # Nor can a curator release a dataset holding tasks they may not see.
    dataset = Dataset.objects.get(repository=small_repository)
    new = reverse("datasets:release_new") + f"?scope=dataset&id={dataset.pk}"
    assert annotator_client.get(new).status_code == 403
    assert curator_client.get(reverse("datasets:release_new") + "?scope=dataset&id=²").status_code == 404


def test_images_are_refused_for_a_task_no_environment_serves_and_for_a_release_without_environments(
        accepted, small_repository, tmp_path, settings):
    from apps.datasets.release_images import ImagesRefused, images_planned, release_images_start

    settings.COMMITGYM_RELEASE_DIR = tmp_path / "releases"
    release = released(scope=scope_of_repository(small_repository))
    with pytest.raises(ImagesRefused, match="no environment of calc@1 serves nobody-1"):
        release_images_start(release=release, tasks=["nobody-1"])
    [(kind, environment)] = images_planned(release, [])
    assert (kind, environment.key, environment.task) == ("environment", "e" * 64, "")
    assert environment.tag == f"commitgym-release/calc:1-{'e' * 64}"
    assert environment.archives == (release.manifest["environments"][0]["setup_archive"],)
    [_, (kind, task)] = images_planned(release, [accepted.instance_id])
    assert (kind, task.task, task.archives) == ("task", accepted.instance_id, environment.archives)
    Release.objects.filter(id=release.id).update(manifest={**release.manifest, "environments": []})
    release.refresh_from_db()
    with pytest.raises(ImagesRefused, match="carries no environment that can be built"):
        release_images_start(release=release)


def test_a_version_written_before_releases_carried_environments_is_written_again(accepted, small_repository,
                                                                                  tmp_path, settings):
    settings.COMMITGYM_RELEASE_DIR = tmp_path / "releases"
    first = released(scope=scope_of_repository(small_repository))
    Release.objects.filter(id=first.id).update(manifest={key: value for key, value in first.manifest.items()
                                                         if key != "environments"})
    again = released(scope=scope_of_repository(small_repository))
    assert str(again) == "calc@2" and again.manifest["environments"][0]["key"] == "e" * 64


def test_a_release_folder_whose_files_changed_or_that_holds_no_environment_is_not_evaluated(
        accepted, small_repository, tmp_path, settings):
    from apps.datasets.grading.evaluation import EvaluationRefused, evaluation_target

    settings.COMMITGYM_RELEASE_DIR = tmp_path / "releases"
    folder = Path(released(scope=scope_of_repository(small_repository)).folder)
    rows = folder / "instances.jsonl"
    rows.write_text(rows.read_text().replace("add() returns the difference", "add() is fine"))
    with pytest.raises(EvaluationRefused, match="the release's files are not as its manifest says: instances.jsonl"):
        evaluation_target(str(folder))
    (tmp_path / "not-a-release").mkdir()
    with pytest.raises(EvaluationRefused, match="is not a release folder: its manifest.json cannot be read"):
        evaluation_target(str(tmp_path / "not-a-release"))
    with pytest.raises(EvaluationRefused, match="no release nothing@3"):
        evaluation_target("nothing@3")


@pytest.mark.parametrize("change, why", [
    ({"setup_archive": "/etc/passwd"}, "its setup archive's name is not plain"),
    ({"setup_archive": "sources/../../secret.tar.gz"}, "its setup archive's name is not plain"),
    ({"python_version": "3.11; curl evil"}, "its Python's version is not a version"),
    ({"as_of": "2026-01-01; rm -rf /"}, "its as-of date is not a date"),
])
def test_a_release_folders_environment_that_reaches_out_of_it_is_never_made(accepted, small_repository, tmp_path,
                                                                          settings, change, why):
    from apps.datasets.grading.release_folder import released_environment
    from apps.jobs.services import JobFailed

    settings.COMMITGYM_RELEASE_DIR = tmp_path / "releases"
    folder = Path(released(scope=scope_of_repository(small_repository)).folder)
    manifest = json.loads((folder / "manifest.json").read_text())
    entry = manifest["environments"][0]
    files = folder / "environments" / entry["key"]
    assert released_environment(files).key == entry["key"]  # as written, it is made
    entry.update(change)
    (folder / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(JobFailed, match=re.escape(why)):
        released_environment(files)


def test_a_release_folder_with_links_or_files_its_manifest_does_not_list_is_refused(accepted, small_repository,
                                                                                   tmp_path, settings):
    from apps.datasets.grading.evaluation import EvaluationRefused, evaluation_target
    from apps.datasets.grading.release_folder import released_environment
    from apps.jobs.services import JobFailed

    settings.COMMITGYM_RELEASE_DIR = tmp_path / "releases"
    folder = Path(released(scope=scope_of_repository(small_repository)).folder)
    files = folder / "environments" / json.loads((folder / "manifest.json").read_text())["environments"][0]["key"]
    (files / "notes.txt").write_text("not in the manifest: it would go into the sandbox with the rest\n")
    with pytest.raises(JobFailed, match="holds what its manifest does not list, or links: notes.txt"):
        released_environment(files)
    (files / "notes.txt").unlink()
    # An archive swapped for a link to the same bytes elsewhere: its checksum matches, and it is still refused.
    archive = sorted((folder / "sources").glob("*.tar.gz"))[0]
    elsewhere = tmp_path / "elsewhere.tar.gz"
    shutil.move(archive, elsewhere)
    archive.symlink_to(elsewhere)
    with pytest.raises(EvaluationRefused, match=f"sources/{archive.name} is a link, or leads out of the release's"):
        evaluation_target(str(folder))
