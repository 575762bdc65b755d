"""The task page's issue section: versions with diffs, the leak score, the model calls, the button."""

import re

import pytest
from django.urls import reverse

from apps.jobs.models import Job
from apps.llm.models import LanguageJob, ModelCall
from apps.tasks.models import IssueVersion, Task
from tests.conftest import validation_make

pytestmark = pytest.mark.django_db


def _call(task, **fields):
    values = dict(role="issue_writer", backend="embedded", model="SmolLM2-135M-Instruct", prompt_name="issue_writer",
                  prompt_version=1, prompt_digest="d", cache_key="k", outcome="ok", tokens_in=812, tokens_out=95,
                  seconds=2.5, task=task)
    return ModelCall.objects.create(**{**values, **fields})


@pytest.fixture
def valid_task(small_repository):
    task = Task.objects.filter(repository=small_repository).exclude(commit__parent_sha="").first()
    Task.objects.filter(id=task.id).update(state="valid")
    task.refresh_from_db()
    return task


def test_versions_diffs_leak_and_calls_are_shown_and_text_renders_inert(curator_client, valid_task, curator):
    first = _call(valid_task)
    IssueVersion.objects.create(task=valid_task, number=1, author="model", model_call=first, leak_score=0.5,
                                leak={"identifiers": ["_collapse"], "counts": {"identifiers": 2}},
                                text="add is wrong <script>alert(1)</script>\nsecond line\n")
    IssueVersion.objects.create(task=valid_task, number=2, author="person", edited_by=curator,
                                text="add is wrong <script>alert(1)</script>\nbetter line\n")
    _call(valid_task, outcome="failed", error_code="rate_limited", error_message="429", tokens_in=0, tokens_out=0)
    page = curator_client.get(reverse("tasks:detail", args=[valid_task.instance_id])).content.decode()
    section = re.search(r'<section id="issue".*?</section>', page, re.S).group(0)
    assert "Version 2, edited by carla" in section and "<script>alert" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in section
    assert "-second line" in re.sub(r"<[^>]+>", "", section) and "+better line" in re.sub(r"<[^>]+>", "", section)
    assert "Version 1 — SmolLM2-135M-Instruct" in section and "leak score 0.50" in section
    assert "issue_writer v1" in section and "812" in section and "rate_limited" in section
    assert "Write a new version" in section


def test_a_leaking_current_version_is_flagged(curator_client, valid_task):
    IssueVersion.objects.create(task=valid_task, number=1, author="model", model_call=_call(valid_task),
                                leak_score=0.8, leak={"test_names": ["test_add"], "counts": {"test_names": 1}},
                                text="see test_add")
    page = curator_client.get(reverse("tasks:detail", args=[valid_task.instance_id])).content.decode()
    assert "leaks the fix" in page and "<code>test_add</code>" in page


def test_writing_the_issue_is_for_curators_and_valid_tasks(curator_client, annotator_client, valid_task,
                                                           monkeypatch):
    monkeypatch.setattr("apps.jobs.services.job_dispatch", lambda job_id: None)
    url = reverse("tasks:backtranslate", args=[valid_task.instance_id])
    assert annotator_client.post(url).status_code == 403
    assert curator_client.post(url).status_code == 302
    job = LanguageJob.objects.get(task=valid_task)
    assert (job.kind, job.state, job.regenerate) == ("backtranslate", "queued", False)
    page = curator_client.get(reverse("tasks:detail", args=[valid_task.instance_id])).content.decode()
    assert 'hx-get="%s"' % reverse("tasks:issue", args=[valid_task.instance_id]) in page
    Job.objects.filter(id=job.job_id).update(state="succeeded")
    LanguageJob.objects.filter(id=job.id).update(outcome="written")
    Task.objects.filter(id=valid_task.id).update(state="mined")
    refused = curator_client.post(url, follow=True).content.decode()
    assert "issues are written for valid tasks" in refused and LanguageJob.objects.count() == 1


def test_generated_tests_are_listed_with_their_outcomes_and_marked(curator_client, annotator_client, valid_task,
                                                                   monkeypatch):
    from apps.tasks.models import GeneratedTest

    call = _call(valid_task, role="test_writer", prompt_name="test_writer")
    GeneratedTest.objects.create(task=valid_task, model_call=call, index=1, content="def test_x():\n    assert f()\n",
                                 path="test_commitgym_generated_1.py", state="kept",
                                 fail_to_pass=["test_commitgym_generated_1.py::test_x"],
                                 before=[{"test_commitgym_generated_1.py::test_x": "FAILED"}],
                                 after=[{"test_commitgym_generated_1.py::test_x": "PASSED"}])
    GeneratedTest.objects.create(task=valid_task, model_call=call, index=2, content="<b>x</b>", state="dropped",
                                 reason="passes_before", path="test_commitgym_generated_2.py")
    page = curator_client.get(reverse("tasks:detail", args=[valid_task.instance_id])).content.decode()
    section = re.search(r'<section id="generated-tests">.*?</section>', page, re.S).group(0)
    assert section.count('badge-generated">generated') == 2 and "dropped: passes_before" in section
    assert "already pass before the fix" in section and "&lt;b&gt;x&lt;/b&gt;" in section
    assert "<code>test_commitgym_generated_1.py::test_x</code>" in section
    assert "Generate other tests" not in section  # a valid task needs no generated tests
    validation_make(valid_task, verdict="valid", generated=True,
                    fail_to_pass=["test_commitgym_generated_1.py::test_x"]).runs.create(
        side="before", scope="selected", index=0, status="failed",
        outcomes={"test_commitgym_generated_1.py::test_x": "FAILED"})
    page = curator_client.get(reverse("tasks:detail", args=[valid_task.instance_id])).content.decode()
    matrix = re.search(r'<table class="table test-matrix">.*?</table>', page, re.S).group(0)
    assert 'test_x</code> <span class="badge badge-generated"' in matrix

    monkeypatch.setattr("apps.jobs.services.job_dispatch", lambda job_id: None)
    Task.objects.filter(id=valid_task.id).update(state="invalid", reason="no_fail_to_pass")
    validation_make(valid_task, verdict="invalid", reason="no_fail_to_pass", environment=_environment(valid_task))
    url = reverse("tasks:generate_tests", args=[valid_task.instance_id])
    assert annotator_client.post(url).status_code == 403
    page = curator_client.get(reverse("tasks:detail", args=[valid_task.instance_id])).content.decode()
    assert "Generate other tests" in page
    curator_client.post(url)
    assert LanguageJob.objects.get(task=valid_task).kind == "generate_tests"


def _environment(task):
    from apps.environments.models import Environment

    return Environment.objects.create(key="env-generated", python_version="3.11.2", lock="", path="/nonexistent",
                                      repository=task.repository)


def test_a_curator_edits_the_issue_into_a_version_that_stays_current(curator_client, annotator_client, valid_task):
    IssueVersion.objects.create(task=valid_task, number=1, author="model", model_call=_call(valid_task),
                                text="model text")
    url = reverse("tasks:issue_edit", args=[valid_task.instance_id])
    assert annotator_client.get(url).status_code == 403
    form = curator_client.get(url).content.decode()
    assert 'name="based_on" value="1"' in form and ">model text</textarea>" in form
    saved = curator_client.post(url, {"text": "<b>edited</b>\r\nby hand", "based_on": "1"})
    assert saved.status_code == 302
    version = IssueVersion.objects.get(task=valid_task, number=2)
    assert (version.author, version.text, version.edited_by.username) == ("person", "<b>edited</b>\nby hand", "carla")
    page = curator_client.get(reverse("tasks:detail", args=[valid_task.instance_id])).content.decode()
    assert "Version 2, edited by carla" in page and "&lt;b&gt;edited&lt;/b&gt;" in page
    assert curator_client.post(url, {"text": "  ", "based_on": "2"}).status_code == 400


def test_the_second_of_two_concurrent_edits_is_refused_with_the_other_shown(curator_client, valid_task, admin_user):
    from apps.tasks.backtranslation import issue_version_edit

    IssueVersion.objects.create(task=valid_task, number=1, author="model", model_call=_call(valid_task), text="v1")
    url = reverse("tasks:issue_edit", args=[valid_task.instance_id])
    issue_version_edit(task=valid_task, text="the other's edit", user=admin_user, based_on=1)  # saved meanwhile
    refused = curator_client.post(url, {"text": "my careful edit", "based_on": "1"})
    page = refused.content.decode()
    assert refused.status_code == 409 and "Not saved" in page and "the other&#x27;s edit" in page
    assert ">my careful edit</textarea>" in page and 'name="based_on" value="2"' in page
    assert IssueVersion.objects.filter(task=valid_task).count() == 2
    assert curator_client.post(url, {"text": "my careful edit", "based_on": "2"}).status_code == 302
    assert IssueVersion.objects.get(task=valid_task, number=3).text == "my careful edit"
