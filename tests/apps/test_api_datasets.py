"""Datasets through the API: counts, candidates with their ground truth and the verifiers' scores
(for curators only: annotators label blind), the dataset's measures as the page computes them,
grading started as jobs, and uploads refused at once or imported by a job."""

import json
import os

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from apps.datasets.models import Candidate, DatasetJob, Execution, Grade, JudgeScore, Sampling, Upload
from apps.datasets.verifiers.measures import measures_cached
from apps.jobs.models import Job
from apps.jobs.services import job_run
from apps.labels.selectors import dataset_tasks_visible
from tests.apps.api_calls import api_call, jobs_not_sent  # noqa: F401 - a fixture
from tests.apps.test_api import bearer
from tests.apps.test_execution_measures import succeeded
from tests.apps.test_labels import candidate_make, dataset_of, verifier_test_set_make
from tests.apps.test_sampling import valid_task  # noqa: F401 - a fixture
from tests.conftest import user_with_role


@pytest.fixture
def graded(valid_task):  # noqa: F811
    right = candidate_make(valid_task, "agent-right")
    wrong = candidate_make(valid_task, "agent-wrong", outcome="no")
    JudgeScore.objects.create(candidate=right, mode="patch", model="judge", prompt_version=1, p_yes=0.9,
                              logprob_yes=-0.1, logprob_no=-2.3)
    JudgeScore.objects.create(candidate=wrong, mode="patch", model="judge", prompt_version=1, p_yes=0.2,
                              logprob_yes=-1.6, logprob_no=-0.2)
    Execution.objects.create(job=succeeded("execute", wrong), candidate=wrong, outcome="partial",
                             outcomes={"t::a": "PASSED", "t::b": "FAILED"}, test_set_id=verifier_test_set_make(valid_task).id)
    return {"task": valid_task, "right": right, "wrong": wrong, "dataset": dataset_of(valid_task)}


def test_datasets_list_and_read_with_their_counts(curator, graded):
    client, auth = Client(), bearer(curator)
    listed = api_call(client, "datasets_list", status=200, **auth)
    row = next(row for row in listed if row["id"] == graded["dataset"].pk)
    assert (row["candidates"], row["graded"]) == (2, 2) and row["repository"] == graded["task"].repository.name
    assert api_call(client, "datasets_retrieve", graded["dataset"].pk, status=200, **auth) == row


def test_candidates_carry_the_ground_truth_and_both_verifiers_for_curators_only(curator, annotator, graded):
    client, auth = Client(), bearer(curator)
    dataset = graded["dataset"]
    rows = api_call(client, "datasets_candidates_list", dataset.pk, status=200, **auth)["results"]
    by_id = {row["id"]: row for row in rows}
    right, wrong = by_id[graded["right"].pk], by_id[graded["wrong"].pk]
    assert (right["outcome"], right["judge_p_yes"], right["execution_outcome"]) == ("resolved", 0.9, None)
    assert (wrong["outcome"], wrong["judge_p_yes"], wrong["execution_outcome"]) == ("no", 0.2, "partial")
    assert "patch" not in right and right["run"] == "agent-right"
    only_no = api_call(client, "datasets_candidates_list", dataset.pk, status=200, query={"outcome": "no"}, **auth)
    assert [row["id"] for row in only_no["results"]] == [graded["wrong"].pk]
    shown = api_call(client, "candidates_retrieve", graded["right"].pk, status=200, **auth)
    assert shown["patch"] == graded["right"].patch and shown["task"] == graded["task"].instance_id

    blind = bearer(annotator)
    for operation, args in (("datasets_candidates_list", [dataset.pk]), ("candidates_retrieve", [graded["right"].pk]),
                            ("datasets_measures_retrieve", [dataset.pk])):
        refused = api_call(client, operation, *args, status=403, **blind)
        assert refused["error"] == "permission_denied" and "label patches without them" in refused["detail"]


def test_runs_carry_their_resolved_rate_over_the_datasets_instances(curator, annotator, graded):
    client, auth, dataset = Client(), bearer(curator), graded["dataset"]
    runs = api_call(client, "datasets_runs_list", dataset.pk, status=200, **auth)
    # One instance (the valid task): the right run resolves it, the wrong one does not.
    assert [(r["name"], r["candidates"], r["resolved"], r["instances"], r["resolved_rate"]) for r in runs] == [
        ("agent-right", 1, 1, 1, 1.0), ("agent-wrong", 1, 0, 1, 0.0)]
    listed = client.get(runs[0]["candidates_url"], **auth).json()["results"]
    assert [row["id"] for row in listed] == [graded["right"].pk]
    assert api_call(client, "datasets_runs_list", dataset.pk, status=403, **bearer(annotator))


def test_the_measures_are_the_pages_own_figures(curator, graded):
    dataset = graded["dataset"]
    body = api_call(Client(), "datasets_measures_retrieve", dataset.pk, status=200, **bearer(curator))
    expected = measures_cached(dataset_tasks_visible(dataset, user=curator), judge_mode="patch").as_json()
    assert body == expected
    # One task, a resolved and a wrong candidate, k draws without replacement: one draw is right half the
    # time whoever picks it; of two, the oracle keeps the right one, random still picks one of them blindly.
    assert body["best_at_k"]["oracle"] == [0.5, 1.0] and body["best_at_k"]["random"] == [0.5, 0.5]
    wrong_mode = api_call(Client(), "datasets_measures_retrieve", dataset.pk, status=400, query={"mode": "vibes"},
                          **bearer(curator))
    assert wrong_mode["fields"] == {"mode": ["The judge's mode is one of patch, trajectory, no-self-assessment."]}


def test_grading_is_one_job_that_starts_a_grade_per_candidate_without_a_ground_truth(curator, graded):
    client, auth = Client(), bearer(curator)
    Candidate.objects.filter(pk=graded["wrong"].pk).update(outcome="")
    first = api_call(client, "datasets_grade_create", graded["dataset"].pk, status=202, **auth)
    second = api_call(client, "datasets_grade_create", graded["dataset"].pk, status=202, **auth)
    assert first["created"] and not second["created"] and first["job"]["id"] == second["job"]["id"]
    assert first["job"]["kind"] == "dataset_grade" and not Grade.objects.exists()  # nothing slow in the request
    job_run(job_id=first["job"]["id"])
    # The one task with an oracle (the others were mined, never validated): its gold and empty controls are
    # made first, then graded too.
    ungraded = set(Candidate.objects.filter(task__repository=graded["task"].repository, outcome="")
                   .values_list("id", flat=True))
    assert set(Candidate.objects.filter(id__in=ungraded).values_list("task_id", flat=True)) == {graded["task"].pk}
    assert graded["wrong"].pk in ungraded and set(Grade.objects.values_list("candidate_id", flat=True)) == ungraded
    assert api_call(client, "jobs_retrieve", first["job"]["id"], status=200, **auth)["state"] == "succeeded"
    again = api_call(client, "datasets_grade_create", graded["dataset"].pk, status=202, **auth)
    job_run(job_id=again["job"]["id"])
    assert Grade.objects.count() == len(ungraded)  # the grades under way are not started twice


def test_a_dataset_of_tasks_one_may_not_see_is_not_there(curator, annotator, graded):
    from django.contrib.auth.models import Group

    graded["task"].repository.allowed_groups.set([Group.objects.create(name="secret-team")])
    client = Client()
    for person in (annotator, curator):  # neither is of the group
        auth = bearer(person)
        assert graded["dataset"].pk not in [row["id"] for row in api_call(client, "datasets_list", status=200, **auth)]
        assert api_call(client, "datasets_retrieve", graded["dataset"].pk, status=404, **auth)["error"] == "not_found"
    assert api_call(client, "datasets_grade_create", graded["dataset"].pk, status=404, **bearer(curator))


def test_an_upload_is_imported_by_a_job_and_refused_at_once_when_it_cannot_be(curator, annotator, graded, settings,
                                                                             tmp_path):
    client, auth = Client(), bearer(curator)
    settings.COMMITGYM_UPLOAD_DIR = tmp_path / "uploads"
    row = b'{"instance_id": "x", "model_name_or_path": "agent", "model_patch": ""}\n'
    started = api_call(client, "uploads_create", status=202, multipart={
        "kind": "predictions", "file": SimpleUploadedFile("preds.jsonl", row)}, **auth)
    assert Job.objects.get(pk=started["job"]["id"]).kind == "upload_import"
    wrong = api_call(client, "uploads_create", status=400, multipart={
        "kind": "predictions", "file": SimpleUploadedFile("preds.csv", row)}, **auth)
    assert wrong["error"] == "upload_refused" and "expected as .jsonl, .json" in wrong["detail"]
    settings.COMMITGYM_UPLOAD_MAX_BYTES = 100
    big = api_call(client, "uploads_create", status=413, multipart={
        "kind": "predictions", "file": SimpleUploadedFile("preds.jsonl", row * 2000)}, **auth)
    assert big["error"] == "too_large"
    assert api_call(client, "uploads_create", status=403, multipart={
        "kind": "predictions", "file": SimpleUploadedFile("preds.jsonl", row)}, **bearer(annotator))
    assert Job.objects.filter(kind="upload_import").count() == 1
    assert len(list((tmp_path / "uploads").iterdir())) == 1  # nothing kept of the refused ones


def test_verify_is_a_job_that_starts_the_judge_and_the_execution_verifiers_first_step_once(curator, annotator,
                                                                                           graded):
    client, auth, dataset = Client(), bearer(curator), graded["dataset"]
    JudgeScore.objects.all().delete()
    before = api_call(client, "datasets_verify_retrieve", dataset.pk, status=200, **auth)
    assert before == {"job": None, "judge_mode": "", "judgings": [], "execution": [], "under_way": 0}
    first = api_call(client, "datasets_verify_create", dataset.pk, status=202, **auth)
    twice = api_call(client, "datasets_verify_create", dataset.pk, status=202, **auth)
    assert first["created"] and not twice["created"] and twice["job"] == first["job"]
    # Asked otherwise, or by another person (whose tasks it would not cover), it is said, not handed over.
    otherwise = api_call(client, "datasets_verify_create", dataset.pk, status=409, data={"tests": False}, **auth)
    assert otherwise["error"] == "job_under_way" and "with other options (judge=True, judge_mode=patch, " \
        "tests=True)" in otherwise["detail"]
    other = api_call(client, "datasets_verify_create", dataset.pk, status=409,
                     **bearer(user_with_role("cora", "curator")))
    assert other["detail"] == (f"Another person's dataset verify of this dataset is under way (job "
                               f"{first['job']['id']}): ask again when it ends.")
    under_way = Job.objects.filter(state__in=Job.ACTIVE_STATES)
    assert first["job"]["kind"] == "dataset_verify" and list(under_way.values_list("kind", flat=True)) == [
        "dataset_verify"]  # nothing else started in the request
    job_run(job_id=first["job"]["id"])
    stands = api_call(client, "datasets_verify_retrieve", dataset.pk, status=200, **auth)
    assert stands["job"]["state"] == "succeeded" and stands["judge_mode"] == "patch"
    assert [job["kind"] for job in stands["judgings"]] == ["judge"]
    # The task's reproduction tests are written already: its next step is choosing verifier tests.
    assert stands["execution"] == [{"task": graded["task"].instance_id, "where": "started",
                                    "sentence": "verifier tests queued"}]
    assert stands["under_way"] == 2 and set(under_way.values_list("kind", flat=True)) == {"judge", "verifier_tests"}
    again = api_call(client, "datasets_verify_create", dataset.pk, status=202, data={"tests": False}, **auth)
    assert again["created"]
    job_run(job_id=again["job"]["id"])
    assert api_call(client, "datasets_verify_retrieve", dataset.pk, status=200, **auth)["judgings"] == []
    assert Job.objects.filter(kind="judge").count() == 1  # the judging under way: not a second
    assert under_way.filter(kind="verifier_tests").count() == 1
    assert api_call(client, "datasets_verify_create", dataset.pk, status=403,
                    **bearer(annotator))["error"] == "permission_denied"


def test_where_verification_stands_names_only_the_tasks_the_reader_sees(curator, admin_user, graded):
    from django.contrib.auth.models import Group

    from apps.datasets.models import Dataset, DatasetTask
    from apps.repositories.models import Repository
    from apps.tasks.models import Task
    from tests.conftest import commits_and_tasks_make

    hidden = Repository.objects.create(name="secret/repo", url="/nowhere/secret/repo")
    hidden.allowed_groups.set([Group.objects.create(name="secret-team")])
    secret = commits_and_tasks_make(hidden, 1)[0]
    Task.objects.filter(pk=secret.pk).update(verdict="valid")
    mixed = Dataset.objects.create(name="mixed", kind=Dataset.Kind.IMPORT)
    DatasetTask.objects.bulk_create([DatasetTask(dataset=mixed, task=graded["task"]),
                                     DatasetTask(dataset=mixed, task=secret)])
    client = Client()
    started = api_call(client, "datasets_verify_create", mixed.pk, status=202, data={"judge": False},
                       **bearer(admin_user))
    job_run(job_id=started["job"]["id"])
    everything = api_call(client, "datasets_verify_retrieve", mixed.pk, status=200, **bearer(admin_user))
    assert [step["task"] for step in everything["execution"]] == sorted([graded["task"].instance_id,
                                                                         secret.instance_id])
    assert everything["under_way"] == 2
    seen = api_call(client, "datasets_verify_retrieve", mixed.pk, status=200, **bearer(curator))
    assert [step["task"] for step in seen["execution"]] == [graded["task"].instance_id]
    assert seen["under_way"] == 1 and secret.instance_id not in json.dumps(seen)


def test_mutants_are_made_by_one_job_once(curator, annotator, graded):
    client, auth, dataset = Client(), bearer(curator), graded["dataset"]
    first = api_call(client, "datasets_mutants_create", dataset.pk, status=202, **auth)
    assert not Candidate.objects.filter(source="mutant").exists()  # nothing made in the request
    job_run(job_id=first["job"]["id"])
    made = DatasetJob.objects.get(job_id=first["job"]["id"]).started
    kinds = set(Candidate.objects.filter(task=graded["task"], source="mutant").values_list("kind", flat=True))
    assert set(made["made"][graded["task"].instance_id]) == kinds
    assert kinds or made["skipped"][graded["task"].instance_id]  # none made: said why
    again = api_call(client, "datasets_mutants_create", dataset.pk, status=202, **auth)
    job_run(job_id=again["job"]["id"])
    assert DatasetJob.objects.get(job_id=again["job"]["id"]).started["made"] == {graded["task"].instance_id: []}
    assert Candidate.objects.filter(source="mutant").count() == len(kinds)
    assert api_call(client, "datasets_mutants_create", dataset.pk, status=403, **bearer(annotator))


def test_sampling_starts_a_job_per_missing_sample_and_a_large_run_must_be_confirmed(curator, graded):
    client, auth, dataset = Client(), bearer(curator), graded["dataset"]
    large = api_call(client, "datasets_samples_create", dataset.pk, status=409, data={"n": 11}, **auth)
    assert large["error"] == "confirm_needed" and "Up to 11 samples from" in large["detail"]
    assert not Job.objects.filter(kind__in=("dataset_sample", "sample")).exists()
    unknown = api_call(client, "datasets_samples_create", dataset.pk, status=400, data={"colour": "red"}, **auth)
    assert unknown["fields"] == {"colour": ["Unknown field."]}
    wrong = api_call(client, "datasets_samples_create", dataset.pk, status=400, data={"n": 0}, **auth)
    assert wrong["fields"] == {"n": ["Ensure this value is greater than or equal to 1."]}
    started = api_call(client, "datasets_samples_create", dataset.pk, status=202,
                       data={"n": 2, "steps": 3, "tokens": 500, "seconds": 60}, **auth)
    assert started["job"]["kind"] == "dataset_sample" and not Sampling.objects.exists()
    job_run(job_id=started["job"]["id"])
    samplings = Sampling.objects.filter(task=graded["task"]).order_by("index")
    assert [(s.index, s.budget["steps"], s.job.kind) for s in samplings] == [(0, 3, "sample"), (1, 3, "sample")]
    assert DatasetJob.objects.get(job_id=started["job"]["id"]).started["samplings"] == [s.job_id for s in samplings]
    confirmed = api_call(client, "datasets_samples_create", dataset.pk, status=202, data={"n": 11, "confirm": True},
                         **auth)
    job_run(job_id=confirmed["job"]["id"])
    assert Sampling.objects.count() == 11  # the two under way are not started again


def test_a_file_on_the_server_is_imported_in_place_only_from_the_import_folders(curator, annotator, settings,
                                                                               tmp_path):
    client, auth = Client(), bearer(curator)
    drop, elsewhere = tmp_path / "drop", tmp_path / "elsewhere"
    drop.mkdir(), elsewhere.mkdir()
    row = b'{"instance_id": "x", "model_name_or_path": "agent", "model_patch": ""}\n'
    (drop / "preds.jsonl").write_bytes(row)
    (elsewhere / "secret.jsonl").write_bytes(row)
    (drop / "escape.jsonl").symlink_to(elsewhere / "secret.jsonl")
    asked = {"kind": "predictions", "path": str(drop / "preds.jsonl")}
    settings.COMMITGYM_IMPORT_ROOTS = []
    none = api_call(client, "imports_create", status=400, data=asked, **auth)
    assert none["error"] == "upload_refused" and "imports no file in place" in none["detail"]
    settings.COMMITGYM_IMPORT_ROOTS = [drop]
    os.mkfifo(drop / "pipe.jsonl")
    for path, said in ((str(elsewhere / "secret.jsonl"), "is not under a folder this server imports from"),
                       (str(elsewhere / "absent.jsonl"), "is not under a folder this server imports from"),
                       (str(drop / "escape.jsonl"), "is not under a folder this server imports from"),
                       (str(drop / ".." / "elsewhere" / "secret.jsonl"), "with no '..'"),
                       (str(drop / ".." / "drop" / "preds.jsonl"), "with no '..'"),
                       ("drop/preds.jsonl", "by its absolute path"),
                       (str(drop / ("x" * 300) / "a.jsonl"), "a path this long is not kept"),
                       (str(drop / "pipe.jsonl"), "there is no file there"),
                       (str(drop / "absent.jsonl"), "there is no file there")):
        refused = api_call(client, "imports_create", status=400, data={**asked, "path": path}, **auth)
        assert said in refused["detail"] and refused["fields"] == {"path": [refused["detail"]]}, path
    assert api_call(client, "imports_create", status=403, data=asked, **bearer(annotator))
    assert not Job.objects.exists()

    started = api_call(client, "imports_create", status=202, data=asked, **auth)
    job_run(job_id=started["job"]["id"])
    upload = Upload.objects.get(job_id=started["job"]["id"])
    assert started["job"]["kind"] == "path_import" and upload.folder == ""
    assert upload.on_server and upload.imported is not None and (drop / "preds.jsonl").read_bytes() == row  # kept

    # A link changed after the file was named does not lead the job out of the folders.
    again = api_call(client, "imports_create", status=202, data=asked, **auth)
    (drop / "preds.jsonl").unlink()
    (drop / "preds.jsonl").symlink_to(elsewhere / "secret.jsonl")
    job_run(job_id=again["job"]["id"])
    failed = Job.objects.get(pk=again["job"]["id"])
    assert failed.error_code == "upload_missing" and "is not under a folder" in failed.error_message


def test_an_upload_reaches_no_task_of_a_repository_its_uploader_may_not_see(curator, graded, settings, tmp_path):
    from django.contrib.auth.models import Group

    from apps.datasets.models import Import

    settings.COMMITGYM_UPLOAD_DIR = tmp_path / "uploads"
    repository = graded["task"].repository
    repository.allowed_groups.set([Group.objects.create(name="secret-team")])
    before = Candidate.objects.count()
    client, auth = Client(), bearer(curator)
    row = json.dumps({"instance_id": graded["task"].instance_id, "model_name_or_path": "intruder",
                      "model_patch": "diff --git a/x b/x\n"}) + "\n"
    started = api_call(client, "uploads_create", status=202, multipart={
        "kind": "predictions", "file": SimpleUploadedFile("preds.jsonl", row.encode())}, **auth)
    job_run(job_id=started["job"]["id"])
    assert Candidate.objects.count() == before
    assert Import.objects.get().refused[0]["reason"] == "no task has this instance id"

    instance = {"instance_id": f"{repository.name.replace('/', '__')}-new", "repo": repository.name,
                "base_commit": "a" * 40, "patch": "diff --git a/x b/x\n", "test_patch": "diff --git a/t b/t\n",
                "problem_statement": "x", "FAIL_TO_PASS": "[]", "PASS_TO_PASS": "[]"}
    started = api_call(client, "uploads_create", status=202, multipart={
        "kind": "instances", "file": SimpleUploadedFile("inst.jsonl", (json.dumps(instance) + "\n").encode())},
        **auth)
    job_run(job_id=started["job"]["id"])
    made = Import.objects.filter(kind="instances").get()
    assert made.refused[0]["reason"] == f"{repository.name} cannot take imported tasks from you"
    assert not repository.tasks.filter(instance_id=instance["instance_id"]).exists()


def test_a_file_held_for_import_is_read_as_it_was_checked_whatever_its_path_leads_to_later(settings, tmp_path):
    from apps.datasets.candidates.in_place import server_file, server_file_held

    drop, elsewhere = tmp_path / "drop", tmp_path / "elsewhere"
    drop.mkdir(), elsewhere.mkdir()
    (drop / "preds.jsonl").write_text("checked\n")
    (elsewhere / "secret.jsonl").write_text("secret\n")
    settings.COMMITGYM_IMPORT_ROOTS = [drop]
    with server_file_held(server_file(str(drop / "preds.jsonl"), (".jsonl",), what="a file")) as held:
        (drop / "preds.jsonl").unlink()  # swapped, between the check and the reading, for a link out
        (drop / "preds.jsonl").symlink_to(elsewhere / "secret.jsonl")
        assert held.name == "preds.jsonl" and held.read_text() == "checked\n"


def test_a_dataset_job_whose_requester_is_gone_fails_instead_of_seeing_every_task(curator, graded):
    started = api_call(Client(), "datasets_mutants_create", graded["dataset"].pk, status=202, **bearer(curator))
    curator.delete()
    job_run(job_id=started["job"]["id"])
    failed = Job.objects.get(pk=started["job"]["id"])
    assert (failed.state, failed.error_code) == ("failed", "requester_gone")
    assert not Candidate.objects.filter(source="mutant").exists()
