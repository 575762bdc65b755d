"""Imports from the datasets page: files uploaded by a curator are checked at once where that is
cheap, refused with the reason (the typed fields kept, nothing stored), and otherwise imported by a
job whose page shows the import's counts."""

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from apps.datasets.models import Candidate, Dataset, Import, Upload
from apps.jobs.models import Job
from apps.jobs.services import job_run
from tests.worker.test_swebench_files import GOLD, instance

pytestmark = pytest.mark.django_db

TASKS = ["octo__calc-1", "octo__calc-2", "octo__calc-3"]


@pytest.fixture(autouse=True)
def _uploads_kept_apart(settings, tmp_path, monkeypatch):
    settings.COMMITGYM_UPLOAD_DIR = tmp_path / "uploads"
    monkeypatch.setattr("apps.jobs.services.job_dispatch", lambda job_id, **kwargs: None)


def _file(name: str, rows) -> SimpleUploadedFile:
    text = rows if isinstance(rows, str) else "".join(json.dumps(row) + "\n" for row in rows)
    return SimpleUploadedFile(name, text.encode())


def _instances_file() -> SimpleUploadedFile:
    return _file("calc.jsonl", [instance(task, base_commit=f"{n:040d}") for n, task in enumerate(TASKS)])


def test_an_uploaded_instance_file_is_imported_by_a_job_whose_page_gives_the_counts(curator_client, settings):
    response = curator_client.post(reverse("datasets:upload_new"), {
        "kind": "instances", "file": _instances_file(), "dataset_name": "calc bench"})
    upload = Upload.objects.get()
    assert response["Location"] == reverse("datasets:upload", args=[upload.pk])
    assert upload.job.state == "queued" and upload.job.kind == "upload_import"
    page = curator_client.get(reverse("datasets:upload", args=[upload.pk])).content.decode()
    assert "waiting for a worker since" in page and 'hx-trigger="every 2s"' in page  # it follows the job
    job_run(job_id=upload.job_id)
    job_run(job_id=upload.job_id)  # a redelivery imports nothing twice
    upload.refresh_from_db()
    assert Import.objects.count() == 1 and upload.imported.dataset.name == "calc bench"
    assert Dataset.objects.get(name="calc bench").tasks.count() == 3
    page = curator_client.get(reverse("datasets:upload", args=[upload.pk])).content.decode()
    assert "<strong>3</strong> rows read, <strong>3</strong> matched, <strong>0</strong> refused: 3 tasks made" in page
    assert "every 2s" not in page and reverse("datasets:import", args=[upload.imported_id]) in page
    assert not any(settings.COMMITGYM_UPLOAD_DIR.iterdir())  # the files went once imported


def test_predictions_come_with_their_report_and_trajectories(curator_client):
    curator_client.post(reverse("datasets:upload_new"), {"kind": "instances", "file": _instances_file()})
    job_run(job_id=Upload.objects.get().job_id)
    predictions = _file("agent.jsonl", [{"instance_id": task, "model_name_or_path": "agent-1", "model_patch": GOLD}
                                        for task in TASKS])
    report = _file("report.json", json.dumps({"schema_version": 2, "resolved_ids": TASKS[:2], "submitted_ids": TASKS,
                                              "unresolved_ids": TASKS[2:]}))
    steps = _file("steps.jsonl", [{"instance_id": TASKS[0], "role": "assistant", "content": "I read calc.py"}])
    curator_client.post(reverse("datasets:upload_new"), {
        "kind": "predictions", "file": predictions, "report": report, "trajectories": [steps]})
    upload = Upload.objects.get(kind="predictions")
    job_run(job_id=upload.job_id)
    upload.refresh_from_db()
    assert upload.imported.report_name == "report.json"
    assert sorted(Candidate.objects.filter(source="import").values_list("outcome", flat=True)) == [
        "no", "resolved", "resolved"]
    page = curator_client.get(reverse("datasets:upload", args=[upload.pk])).content.decode()
    assert "run agent-1, 3 candidates, 2 resolved by the report" in page


@pytest.mark.parametrize("fields, words", [
    ({"kind": "instances", "file": _file("calc.csv", "a,b\n")}, "calc.csv: an instances file is expected as .jsonl, "
                                                                ".json, .parquet."),
    ({"kind": "instances", "file": _file("calc.jsonl", "")}, "calc.jsonl is empty."),
    ({"kind": "instances"}, "Choose the file to import."),
    ({"file": _file("calc.jsonl", "{}\n")}, "Say whether the file holds instances or predictions."),
    ({"kind": "predictions", "file": _file("p.jsonl", "{}\n"), "report": _file("report.json", "[1, 2]")},
     "report.json is not a report: it holds list"),
    ({"kind": "predictions", "file": _file("p.jsonl", "{}\n"), "trajectories": [_file("t.txt", "x")]},
     "t.txt: a trajectory is expected as .jsonl, .traj."),
])
def test_files_that_cannot_be_imported_are_refused_at_once_and_the_form_keeps_what_was_typed(curator_client, fields,
                                                                                            words, settings):
    response = curator_client.post(reverse("datasets:upload_new"), {**fields, "run_name": "my agent"})
    page = response.content.decode()
    assert response.status_code == 400 and words in page
    assert 'value="my agent"' in page and "choose the files again" in page
    assert not Upload.objects.exists() and not Job.objects.exists()
    assert not settings.COMMITGYM_UPLOAD_DIR.exists() or not any(settings.COMMITGYM_UPLOAD_DIR.iterdir())


def test_too_much_to_upload_is_refused_with_the_limit_and_the_command_to_use(curator_client, settings):
    settings.COMMITGYM_UPLOAD_MAX_BYTES = 100
    response = curator_client.post(reverse("datasets:upload_new"), {"kind": "instances", "file": _instances_file()})
    assert response.status_code == 400
    assert "at most 0 MB are imported from the page" in response.content.decode()
    assert "manage.py import_instances" in response.content.decode()


def test_a_file_unreadable_as_a_whole_fails_its_job_in_words_and_keeps_the_files_for_a_retry(curator_client):
    curator_client.post(reverse("datasets:upload_new"), {"kind": "instances", "file": _file("calc.json", "{not json")})
    upload = Upload.objects.get()
    job_run(job_id=upload.job_id)
    upload.job.refresh_from_db()
    assert upload.job.state == "failed" and "nothing imported: calc.json is not JSON" in upload.job.error_message
    assert (upload.folder_path / "file" / "calc.json").is_file()
    page = curator_client.get(reverse("datasets:upload", args=[upload.pk])).content.decode()
    assert 'id="upload-error"' in page and "nothing imported" in page


def test_annotators_cannot_upload(annotator_client):
    response = annotator_client.post(reverse("datasets:upload_new"), {"kind": "instances", "file": _instances_file()})
    assert response.status_code == 403 and not Upload.objects.exists()
