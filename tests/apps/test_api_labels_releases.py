"""Labels and releases through the API: an annotator's blind item and label, a curator's settlement,
agreement and export; a release made, read, downloaded and withdrawn."""

import json

from django.test import Client

from apps.datasets.models import Dataset, Release
from apps.jobs.models import Job
from apps.jobs.services import job_run
from apps.labels.models import Label, Settlement
from tests.apps.api_calls import api_call, jobs_not_sent  # noqa: F401 - a fixture
from tests.apps.test_api import bearer
from tests.apps.test_labels import candidate_make, dataset_of
from tests.apps.test_releases import accepted, no_index  # noqa: F401 - fixtures
from tests.apps.test_sampling import valid_task  # noqa: F401 - a fixture
from tests.conftest import user_with_role


def test_two_annotators_label_blind_and_a_curator_settles_their_disagreement(curator, valid_task):  # noqa: F811
    candidate = candidate_make(valid_task, "agent-sentinel-run", trajectory=[{"thought": "sure of it"}])
    dataset = dataset_of(valid_task)
    ann, bob = (bearer(user_with_role(name, "annotator")) for name in ("ann", "bob"))
    client = Client()

    taken = api_call(client, "datasets_labels_retrieve", dataset.pk, status=200, **ann)
    assert taken["item"]["candidate"] == candidate.pk and taken["item"]["patch"] == candidate.patch
    assert "agent-sentinel-run" not in json.dumps(taken) and "resolved" not in json.dumps(taken)
    bare = api_call(client, "datasets_labels_create", dataset.pk, status=409,
                    data={"candidate": candidate.pk, "verdict": "incorrect", "confidence": 3}, **ann)
    assert bare["error"] == "label_refused" and "needs a rationale" in bare["detail"]
    out_of_range = api_call(client, "datasets_labels_create", dataset.pk, status=409,
                            data={"candidate": candidate.pk, "verdict": "correct", "confidence": 7}, **ann)
    assert "confidence of 1" in out_of_range["detail"]
    made = api_call(client, "datasets_labels_create", dataset.pk, status=201, data={
        "candidate": candidate.pk, "verdict": "incorrect", "confidence": 3, "rationale": "drops the digits"}, **ann)
    assert made["verdict"] == "incorrect"
    twice = api_call(client, "datasets_labels_create", dataset.pk, status=409,
                     data={"candidate": candidate.pk, "verdict": "correct", "confidence": 1}, **ann)
    assert twice["error"] == "label_refused" and twice["detail"].endswith("a label is given once.")
    assert api_call(client, "datasets_labels_retrieve", dataset.pk, status=200, **ann)["item"] is None

    second = api_call(client, "datasets_labels_retrieve", dataset.pk, status=200, **bob)
    assert "drops the digits" not in json.dumps(second)  # another person's label stays out of sight
    api_call(client, "datasets_labels_create", dataset.pk, status=201,
             data={"candidate": candidate.pk, "verdict": "correct", "confidence": 2}, **bob)
    assert Label.objects.filter(candidate=candidate).count() == 2

    refused = api_call(client, "datasets_labels_candidates_settle_create", dataset.pk, candidate.pk, status=403,
                       data={"verdict": "incorrect", "note": "x"}, **ann)
    assert refused["error"] == "permission_denied"
    cur = bearer(curator)
    settled = api_call(client, "datasets_labels_candidates_settle_create", dataset.pk, candidate.pk, status=201,
                       data={"verdict": "incorrect", "note": "the digits must stay"}, **cur)
    assert settled["settled_by"] == curator.username and Settlement.objects.get().verdict == "incorrect"

    agreement = api_call(client, "datasets_labels_agreement_retrieve", dataset.pk, status=200, **cur)
    assert agreement["labels"] == 2 and agreement["pairs"] == 1 and agreement["raw"] == 0.0

    given = api_call(client, "datasets_labels_given_list", dataset.pk, status=200, **cur)["results"]
    assert [(row["annotator"], row["verdict"], row["rationale"], row["task"]) for row in given] == [
        ("bob", "correct", "", valid_task.instance_id), ("ann", "incorrect", "drops the digits", valid_task.instance_id)]
    only_ann = api_call(client, "datasets_labels_given_list", dataset.pk, status=200, query={"annotator": "ann"}, **cur)
    assert [row["verdict"] for row in only_ann["results"]] == ["incorrect"]
    blind = api_call(client, "datasets_labels_given_list", dataset.pk, status=403, **ann)  # others' labels, unseen
    assert blind["error"] == "permission_denied"
    assert [(pair["first"], pair["second"]) for pair in agreement["cohens"]] == [("ann", "bob")]
    assert api_call(client, "datasets_labels_agreement_retrieve", dataset.pk, status=403, **ann)["error"] == \
        "permission_denied"
    export = api_call(client, "datasets_labels_export_create", dataset.pk, status=202,
                      data={"format": "csv", "pseudonymize": True}, **cur)
    assert Job.objects.get(pk=export["job"]["id"]).kind == "label_export"


def test_labels_of_a_dataset_holding_tasks_one_may_not_see_are_exported_by_an_admin_only(curator, admin_user,
                                                                                      valid_task, tmp_path):  # noqa: F811
    from django.contrib.auth.models import Group

    from apps.datasets.models import DatasetTask
    from apps.repositories.models import Repository
    from tests.conftest import commits_and_tasks_make

    mixed = Dataset.objects.create(name="mixed", kind=Dataset.Kind.IMPORT)
    hidden = Repository.objects.create(name="secret/repo", url="/nowhere/secret/repo")
    hidden.allowed_groups.set([Group.objects.create(name="secret-team")])
    DatasetTask.objects.bulk_create([DatasetTask(dataset=mixed, task=valid_task),
                                     DatasetTask(dataset=mixed, task=commits_and_tasks_make(hidden, 1)[0])])
    refused = api_call(Client(), "datasets_labels_export_create", mixed.pk, status=403, data={}, **bearer(curator))
    assert "tasks of repositories you may not see" in refused["detail"]
    assert not Job.objects.filter(kind="label_export").exists()
    api_call(Client(), "datasets_labels_export_create", mixed.pk, status=202, data={}, **bearer(admin_user))


def test_a_release_is_made_read_downloaded_and_withdrawn(accepted, curator, annotator, small_repository,  # noqa: F811
                                                         settings, tmp_path):
    settings.COMMITGYM_RELEASE_DIR = tmp_path / "releases"
    client, auth = Client(), bearer(curator)
    dataset = Dataset.objects.get(repository=small_repository)
    refused = api_call(client, "releases_create", status=403, data={"dataset": dataset.pk, "name": "calc"},
                       **bearer(annotator))
    assert refused["error"] == "permission_denied"
    bad = api_call(client, "releases_create", status=400, data={"dataset": dataset.pk, "name": "no spaces"}, **auth)
    assert bad["error"] == "release_refused" and "cannot name a release" in bad["detail"]
    started = api_call(client, "releases_create", status=202, data={"dataset": dataset.pk, "name": "calc"}, **auth)
    twice = api_call(client, "releases_create", status=202, data={"dataset": dataset.pk, "name": "calc"}, **auth)
    assert started["created"] and not twice["created"] and twice["job"] == started["job"]  # not a second version
    job_run(job_id=started["job"]["id"])
    release = Release.objects.get(job_id=started["job"]["id"])

    listed = api_call(client, "releases_list", status=200, **auth)
    assert [(r["name"], r["version"], r["state"]) for r in listed] == [("calc", 1, "succeeded")]
    shown = api_call(client, "releases_retrieve", release.pk, status=200, **auth)
    assert shown["manifest"]["sources"]["repositories"] == [{"name": small_repository.name, "tasks": 1}]
    instances = next(file for file in shown["files"] if file["name"] == "instances.jsonl")
    downloaded = client.get(instances["url"], **auth)
    assert downloaded.status_code == 200
    rows = [json.loads(line) for line in b"".join(downloaded.streaming_content).decode().splitlines()]
    assert [row["instance_id"] for row in rows] == [accepted.instance_id]
    api_call(client, "releases_files_retrieve", release.pk, "instances.jsonl", status=200, **auth)
    assert api_call(client, "releases_files_retrieve", release.pk, "../manifest.json", status=404, **auth)

    no_reason = api_call(client, "releases_withdraw_create", release.pk, status=400, data={"reason": " "}, **auth)
    assert no_reason["fields"] == {"reason": ["This field may not be blank."]}
    gone = api_call(client, "releases_withdraw_create", release.pk, status=200,
                    data={"reason": "a task's tests were weak"}, **auth)
    assert gone["withdrawn"] is True

    again = api_call(client, "releases_withdraw_create", release.pk, status=409, data={"reason": "twice"}, **auth)
    assert again["error"] == "release_refused"


def test_an_export_of_grades_is_for_curators_only(accepted, curator, annotator, small_repository, settings,  # noqa: F811
                                                  tmp_path):
    from apps.datasets.releases import export_start

    settings.COMMITGYM_RELEASE_DIR = tmp_path / "releases"
    dataset = Dataset.objects.get(repository=small_repository)
    started = api_call(Client(), "releases_create", status=202, data={"dataset": dataset.pk, "name": "calc"},
                       **bearer(curator))
    job_run(job_id=started["job"]["id"])
    export = export_start(release=Release.objects.get(job_id=started["job"]["id"]), kind="judge", user=curator)
    job_run(job_id=export.job_id)
    assert api_call(Client(), "releases_retrieve", export.pk, status=200, **bearer(curator))["kind"] == "judge"
    blind = bearer(annotator)
    assert api_call(Client(), "releases_retrieve", export.pk, status=404, **blind)["error"] == "not_found"
    assert api_call(Client(), "releases_files_retrieve", export.pk, "judge.jsonl", status=404, **blind)
