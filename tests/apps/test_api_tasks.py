"""Tasks through the API: the list's filters and sorts on a cursor, a task with its oracle, issue,
reviews and history, validate, review and bulk actions with the pages' roles and refusals."""

import pytest
from django.test import Client

from apps.jobs.models import Job
from apps.repositories.models import Repository
from apps.tasks.models import BulkAction, Review, Task
from tests.apps.api_calls import api_call, jobs_not_sent  # noqa: F401 - a fixture
from tests.apps.test_api import bearer
from tests.conftest import commits_and_tasks_make, task_put_in_review


@pytest.fixture
def tasks(db):
    repository = Repository.objects.create(name="o/r", url="/nowhere/o/r")
    made = commits_and_tasks_make(repository, 6)
    for n, task in enumerate(made[:3]):
        task_put_in_review(task, fail_to_pass=[f"tests/test_calc.py::test_{i}" for i in range(n + 1)])
    return [Task.objects.get(pk=task.pk) for task in made]


def test_the_list_filters_and_sorts_as_the_page_does_on_a_stable_cursor(curator, tasks):
    client, auth = Client(), bearer(curator)

    def ids(**query):
        body = api_call(client, "tasks_list", status=200, query=query, **auth)
        return [row["instance_id"] for row in body["results"]], body

    in_review = sorted(t.instance_id for t in tasks[:3])
    assert sorted(ids(state="needs_review")[0]) == in_review
    assert ids(state="needs_review", sort="-f2p")[0] == [tasks[2].instance_id, tasks[1].instance_id,
                                                         tasks[0].instance_id]
    assert sorted(ids(f2p_min=2)[0]) == sorted([tasks[1].instance_id, tasks[2].instance_id])
    assert sorted(ids(state="mined")[0]) == sorted(t.instance_id for t in tasks[3:])

    first, body = ids(sort="id", page_size=4)
    commits_and_tasks_make(tasks[0].repository, 3, start=50)  # new tasks meanwhile
    rest = client.get(body["next"], **auth).json()
    later = [row["instance_id"] for row in rest["results"]]
    everything = sorted(Task.objects.values_list("instance_id", flat=True))
    assert first + later == everything[:4 + len(later)] and not set(first) & set(later)

    wrong = api_call(client, "tasks_list", status=400, query={"state": "finished", "sort": "-size"}, **auth)
    assert wrong["error"] == "invalid" and set(wrong["fields"]) == {"state", "sort"}


def test_a_task_reads_with_its_oracle_issue_reviews_and_history(curator, tasks):
    task = tasks[1]
    body = api_call(Client(), "tasks_retrieve", task.instance_id, status=200, **bearer(curator))
    assert body["state"] == "needs_review" and body["repository"] == "o/r"
    assert body["oracle"]["verdict"] == "valid"
    assert body["oracle"]["fail_to_pass"] == ["tests/test_calc.py::test_0", "tests/test_calc.py::test_1"]
    assert {run["side"] for run in body["oracle"]["runs"]} == {"before", "after"}
    assert "output" not in body["oracle"]["runs"][0]  # logs stay on the pages
    assert [v["text"] for v in body["issue_versions"]] == ["add() returns the difference"]
    assert any("valid" in row["what"] for row in body["history"])


def test_validate_twice_gives_the_job_under_way_and_an_annotator_is_refused(curator, annotator, tasks):
    client, auth = Client(), bearer(curator)
    task = tasks[4]
    first = api_call(client, "tasks_validate_create", task.instance_id, status=202, **auth)
    second = api_call(client, "tasks_validate_create", task.instance_id, status=202, **auth)
    assert first["created"] and not second["created"] and first["job"]["id"] == second["job"]["id"]
    assert Job.objects.filter(kind="validation", subject_id=task.pk, state="queued").count() == 1
    refused = api_call(client, "tasks_validate_create", tasks[5].instance_id, status=403, **bearer(annotator))
    assert refused["error"] == "permission_denied"
    Task.objects.filter(pk=tasks[5].pk).update(source="imported")
    imported = api_call(client, "tasks_validate_create", tasks[5].instance_id, status=409, **auth)
    assert imported["error"] == "imported_instance"


def test_a_review_needs_the_rubric_in_words_and_an_annotator_cannot_change_a_task(curator, annotator, tasks):
    client, auth = Client(), bearer(curator)
    task = tasks[0]
    by_annotator = api_call(client, "tasks_review_create", task.instance_id, status=403,
                            data={"decision": "accept"}, **bearer(annotator))
    assert "Only curators and admins can accept" in by_annotator["detail"]
    half = api_call(client, "tasks_review_create", task.instance_id, status=409, data={"decision": "accept"},
                    **auth)
    assert half["error"] == "review_refused" and half["detail"].startswith("Accepting needs the whole rubric")
    assert not Review.objects.exists()
    done = api_call(client, "tasks_review_create", task.instance_id, status=200,
                    data={"decision": "reject", "reject_reason": "trivial", "note": "a one-character fix"}, **auth)
    assert done["outcome"] == "rejected" and done["task"]["state"] == "rejected"
    detail = api_call(client, "tasks_retrieve", task.instance_id, status=200, **auth)
    assert detail["reviews"][0]["reviewer"] == curator.username and detail["reviews"][0]["note"] == "a one-character fix"
    assert any(row["actor"] == curator.username for row in detail["history"])


def test_a_bulk_action_runs_only_on_the_number_of_tasks_expected(curator, tasks):
    client, auth = Client(), bearer(curator)
    asked = {"action": "reject", "filters": {"state": "needs_review"}, "reject_reason": "trivial"}
    stale = api_call(client, "tasks_bulk_create", status=409, data={**asked, "expected": 5}, **auth)
    assert "now matches 3 tasks" in stale["detail"] and not BulkAction.objects.exists()
    started = api_call(client, "tasks_bulk_create", status=202, data={**asked, "expected": 3}, **auth)
    bulk = BulkAction.objects.get()
    assert started["job"]["id"] == bulk.job_id and sorted(bulk.task_ids) == sorted(t.pk for t in tasks[:3])
    unknown = api_call(client, "tasks_bulk_create", status=400,
                       data={**asked, "expected": 3, "filters": {"colour": "red"}}, **auth)
    assert unknown["fields"] == {"filters.colour": ["Unknown field."]}


def test_an_issue_is_written_for_a_valid_task_only_once_at_a_time(curator, tasks):
    client, auth = Client(), bearer(curator)
    first = api_call(client, "tasks_issue_create", tasks[0].instance_id, status=202, **auth)
    second = api_call(client, "tasks_issue_create", tasks[0].instance_id, status=202, **auth)
    assert first["created"] and not second["created"] and first["job"]["id"] == second["job"]["id"]
    assert first["job"]["kind"] == "backtranslate"
    mined = api_call(client, "tasks_issue_create", tasks[4].instance_id, status=409, **auth)
    assert mined["error"] == "not_valid" and "issues are written for valid tasks" in mined["detail"]
