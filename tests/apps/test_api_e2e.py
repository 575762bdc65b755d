"""The API alone, end to end, through the real parts (Redis, a worker process, the sandbox, the
embedded judge) on the sample repository: register and mine, validate a fix, upload predictions,
grade, verify (the judge and the execution verifier), read best@k, release and download the instances,
with the figures the pages show."""

import json
import time

import pytest
from django.test import Client
from django.urls import reverse
from unidiff import PatchSet

from apps.datasets.candidates.mutants import files_at_commits
from apps.datasets.models import Dataset
from apps.datasets.selectors import dataset_tasks_visible
from apps.datasets.verifiers.measures import measures_cached
from apps.tasks.selectors import task_patches
from apps.tasks.models import Task
from tests.apps.api_calls import api_call
from tests.apps.test_grading_e2e import reproduction_answer_record
from tests.apps.test_api import bearer
from worker.demo.sample_repo import sample_repo_write

pytestmark = pytest.mark.e2e


def job_done(client, auth, job_id: int, *, timeout: float = 600) -> dict:
    """Poll the job through the API until it ends; it must succeed."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = api_call(client, "jobs_retrieve", job_id, status=200, **auth)
        if job["state"] not in ("queued", "running"):
            assert job["state"] == "succeeded", (job["kind"], job["error_code"], job["error_message"])
            return job
        time.sleep(0.5)
    raise AssertionError(f"job {job_id} did not end within {timeout} s")


def verifiers_done(client, auth, dataset_id: int, *, timeout: float = 900) -> dict:
    """Ask the verifiers on until none is under way and each task's execution verifier is at its end."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        stands = api_call(client, "datasets_verify_retrieve", dataset_id, status=200, **auth)
        if not stands["under_way"] and stands["job"]["state"] not in ("queued", "running"):
            if all(step["where"] in ("done", "stopped", "not_here") for step in stands["execution"]):
                assert all(step["where"] == "done" for step in stands["execution"]), stands["execution"]
                return stands
            job_done(client, auth, api_call(client, "datasets_verify_create", dataset_id, status=202,
                                            data={"judge": False}, **auth)["job"]["id"])
        time.sleep(0.5)
    raise AssertionError(f"the verifiers did not end within {timeout} s")


def test_a_script_mines_validates_grades_judges_and_releases_through_the_api_alone(
        celery_worker, tmp_path, curator, curator_client, settings):
    settings.COMMITGYM_RELEASE_DIR = tmp_path / "releases"
    settings.COMMITGYM_UPLOAD_DIR = tmp_path / "uploads"
    commits = sample_repo_write(tmp_path / "textkit")
    fix = next(c for c in commits if c.kind == "fix_with_test")
    client, auth = Client(), bearer(curator)

    made = api_call(client, "repositories_create", status=201, data={"location": str(tmp_path / "textkit")}, **auth)
    job_done(client, auth, made["mining"]["job"]["id"])
    repository_id = made["repository"]["id"]
    kept = api_call(client, "repositories_commits_list", repository_id, status=200, query={"status": "kept"}, **auth)
    assert fix.sha in [c["sha"] for c in kept["results"]]

    task_id = api_call(client, "tasks_list", status=200, query={"q": fix.sha[:10]}, **auth)["results"][0]["instance_id"]
    validating = api_call(client, "tasks_validate_create", task_id, status=202, **auth)
    job_done(client, auth, validating["job"]["id"])
    task = api_call(client, "tasks_retrieve", task_id, status=200, **auth)
    assert task["oracle"]["verdict"] == "valid" and set(fix.fail_to_pass) <= set(task["oracle"]["fail_to_pass"])

    writing = api_call(client, "tasks_issue_create", task_id, status=202, **auth)
    job_done(client, auth, writing["job"]["id"])
    assert api_call(client, "tasks_retrieve", task_id, status=200, **auth)["issue_versions"]

    gold = task_patches(task=Task.objects.get(instance_id=task_id)).source_patch
    predictions = "".join(json.dumps({"instance_id": task_id, "model_name_or_path": name, "model_patch": patch}) + "\n"
                          for name, patch in (("agent-right", gold), ("agent-empty", "")))
    from django.core.files.uploadedfile import SimpleUploadedFile

    upload = api_call(client, "uploads_create", status=202, multipart={
        "kind": "predictions", "file": SimpleUploadedFile("preds.jsonl", predictions.encode())}, **auth)
    job_done(client, auth, upload["job"]["id"])

    dataset = Dataset.objects.get(repository_id=repository_id)
    grading = api_call(client, "datasets_grade_create", dataset.pk, status=202, **auth)
    job_done(client, auth, grading["job"]["id"])
    for job in api_call(client, "jobs_list", status=200, query={"kind": "grade"}, **auth)["results"]:
        job_done(client, auth, job["id"])
    candidates = api_call(client, "datasets_candidates_list", dataset.pk, status=200, query={"task": task_id},
                          **auth)["results"]
    outcomes = {row["run"]: row["outcome"] for row in candidates if row["run"]}
    assert outcomes == {"agent-right": "resolved", "agent-empty": "no_patch"}

    # Both verifiers: the judge (the embedded model), and the execution verifier from reproduction tests the
    # test writer gave (recorded as an earlier answer: the fix's own tests), run against every candidate.
    fixed = Task.objects.get(instance_id=task_id)
    test_paths = [patched.path for patched in PatchSet(task_patches(task=fixed).test_patch)]
    reproduction_answer_record(fixed, "\n\n".join(text for (text,) in files_at_commits(
        fixed, test_paths, (fixed.commit.sha,)).values()))
    verifying = api_call(client, "datasets_verify_create", dataset.pk, status=202, **auth)
    job_done(client, auth, verifying["job"]["id"])
    stands = verifiers_done(client, auth, dataset.pk)
    assert [step["task"] for step in stands["execution"]] == [task_id]
    measures = api_call(client, "datasets_measures_retrieve", dataset.pk, status=200, **auth)
    # The page's figures are the same computation, cached under the same scope.
    page = measures_cached(dataset_tasks_visible(dataset, user=curator), judge_mode="patch").as_json()
    assert measures == page and measures["best_at_k"]["oracle"][0] == 1.0
    assert measures["best_at_k"]["execution"][-1] == 1.0 and measures["best_at_k"]["judge"] is not None
    verified = {row["run"]: (row["execution_outcome"], row["judge_p_yes"]) for row in api_call(
        client, "datasets_candidates_list", dataset.pk, status=200, query={"task": task_id}, **auth)["results"]}
    assert verified["agent-right"][0] == "resolved" and verified["agent-right"][1] is not None, verified
    shown = curator_client.get(reverse("datasets:detail", args=[dataset.pk])).content.decode()
    assert f'{measures["best_at_k"]["oracle"][0]:.3f}' in shown

    state = api_call(client, "tasks_retrieve", task_id, status=200, **auth)["state"]
    release = api_call(client, "releases_create", status=202,
                       data={"dataset": dataset.pk, "name": "textkit", "states": [state]}, **auth)
    job_done(client, auth, release["job"]["id"])
    written = next(r for r in api_call(client, "releases_list", status=200, **auth) if r["name"] == "textkit")
    instances = next(f for f in written["files"] if f["name"] == "instances.jsonl")
    downloaded = client.get(instances["url"], **auth)
    rows = [json.loads(line) for line in b"".join(downloaded.streaming_content).decode().splitlines()]
    assert [row["instance_id"] for row in rows] == [task_id] and rows[0]["FAIL_TO_PASS"]
