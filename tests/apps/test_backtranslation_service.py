"""Writing issues: model calls recorded and cached, versions kept, leaks flagged, failures harmless.
The embedded model answers for real; a recorded call stands in for a model that writes a given text."""

import pytest

from apps.jobs.services import job_run
from apps.llm.calls import model_call
from apps.llm.models import ModelCall
from apps.tasks.backtranslation import ISSUE_WRITER_TOKENS, issue_prompt, task_backtranslate, task_current_issue
from apps.tasks.language_jobs import language_job_start
from apps.tasks.models import IssueVersion, Task, TestRunRecord, Validation
from tests.conftest import record_model_answer, validation_make
from worker.engine.llm.clients import ModelError
from worker.engine.llm.prompts import prompt_load

F2P = "tests/test_calc.py::test_add"
pytestmark = pytest.mark.django_db


@pytest.fixture
def valid_task(small_repository):
    task = Task.objects.get(repository=small_repository, commit__message__startswith="Fix add")
    validation = validation_make(task, verdict="valid", fail_to_pass=[F2P])
    TestRunRecord.objects.create(validation=validation, side="before", scope="selected", index=0, status="failed",
                                 outcomes={F2P: "FAILED"}, output="E   assert -1 == 5\nFAILED " + F2P)
    Task.objects.filter(id=task.id).update(state="valid")
    task.refresh_from_db()
    return task


def _record_answer(task: Task, answer: str):
    prompt, variables = issue_prompt(task, Validation.objects.get(task=task))
    return record_model_answer(role="issue_writer", prompt=prompt, variables=variables, answer=answer,
                               max_tokens=ISSUE_WRITER_TOKENS, task=task)


def test_the_embedded_model_writes_a_version_and_a_second_run_costs_nothing(valid_task):
    assert task_backtranslate(task=valid_task) == ("written", "", "SmolLM2-135M-Instruct")
    version = task_current_issue(task=valid_task)
    assert version.number == 1 and version.author == "model" and version.text
    call = version.model_call
    assert (call.role, call.prompt_name, call.prompt_version, call.outcome) == ("issue_writer", "issue_writer", 1, "ok")
    assert call.tokens_in > 100 and call.tokens_out > 0 and call.seconds > 0 and call.task == valid_task
    assert task_backtranslate(task=valid_task)[0] == "cached"
    assert ModelCall.objects.count() == 1 and IssueVersion.objects.count() == 1


def test_regenerating_adds_a_version_and_keeps_the_first(valid_task):
    task_backtranslate(task=valid_task)
    assert task_backtranslate(task=valid_task, regenerate=True)[0] == "written"
    versions = list(IssueVersion.objects.filter(task=valid_task).order_by("number"))
    assert [v.number for v in versions] == [1, 2]
    assert versions[1].model_call.regenerated and versions[1].model_call.parameters["temperature"] > 0
    # A plain run is still answered by the first, deterministic call, not by the regenerated one.
    assert task_backtranslate(task=valid_task)[0] == "cached"
    assert IssueVersion.objects.filter(task=valid_task).count() == 2


def test_a_leaking_issue_is_flagged(valid_task):
    _record_answer(valid_task, "add subtracts. The fix: `return a + b` instead; test_add shows it.")
    assert task_backtranslate(task=valid_task) == ("written", "", "recorded")
    version = task_current_issue(task=valid_task)
    assert version.leak_score == 1.0 and version.leak_flagged and version.leak["test_names"] == ["test_add"]


def test_a_person_s_edit_stays_the_problem_statement(valid_task, curator):
    _record_answer(valid_task, "add(2, 3) gives -1\n\nI expected 5.")
    task_backtranslate(task=valid_task)
    person = IssueVersion.objects.create(task=valid_task, number=2, text="Edited by hand", author="person",
                                         edited_by=curator)
    assert task_backtranslate(task=valid_task, regenerate=True)[0] == "written"
    assert IssueVersion.objects.filter(task=valid_task).count() == 3
    assert task_current_issue(task=valid_task) == person
    assert not person.leak_flagged


def test_a_model_that_fails_is_recorded_and_stores_no_version(valid_task, settings):
    settings.COMMITGYM_MODELS = {**settings.COMMITGYM_MODELS, "issue_writer": {
        "backend": "openai", "model": "m", "base_url": "http://127.0.0.1:9/v1", "api_key": "sk-hidden", "timeout": 5}}
    with pytest.raises(ModelError):
        task_backtranslate(task=valid_task)
    failed = ModelCall.objects.get()
    assert failed.outcome == "failed" and failed.error_code == "unreachable" and "sk-hidden" not in failed.error_message
    assert not IssueVersion.objects.exists()
    job = language_job_start(task=valid_task, kind="backtranslate")
    assert job_run(job_id=job.job_id)
    job.refresh_from_db()
    assert (job.state, job.outcome) == ("failed", "failed") and job.detail.startswith("unreachable")
    assert job.job.error_code == "model_failed" and "sk-hidden" not in job.job.error_message
    assert job_run(job_id=job.job_id)  # a second delivery does nothing
    assert ModelCall.objects.count() == 2


def test_only_valid_tasks_get_an_issue(small_repository):
    task = Task.objects.filter(repository=small_repository).first()
    outcome, detail, _ = task_backtranslate(task=task)
    assert outcome == "skipped" and "valid tasks" in detail and not ModelCall.objects.exists()


def test_the_cache_key_follows_every_input(valid_task):
    prompt = prompt_load("issue_writer")
    first, cached = model_call(role="issue_writer", prompt=prompt, variables={
        "commit_message": "a", "source_patch": "b", "failing_output": "c"}, max_tokens=8)
    again, cached_again = model_call(role="issue_writer", prompt=prompt, variables={
        "commit_message": "a", "source_patch": "b", "failing_output": "c"}, max_tokens=8)
    other, cached_other = model_call(role="issue_writer", prompt=prompt, variables={
        "commit_message": "a", "source_patch": "b", "failing_output": "d"}, max_tokens=8)
    assert (cached, cached_again, cached_other) == (False, True, False)
    assert again == first and other != first


LOOPING = "add() gives the wrong sum.\n\n" + "The result of add should be the sum of its two arguments. " * 20


def test_a_degenerate_or_cut_off_issue_waits_outside_the_queue_until_a_curator_lets_it_in(valid_task, curator,
                                                                                        curator_client):
    from django.urls import reverse

    from apps.tasks.review import review_queue

    call = _record_answer(valid_task, LOOPING)
    ModelCall.objects.filter(id=call.id).update(finish_reason="length")
    assert task_backtranslate(task=valid_task)[0] == "written"
    version = task_current_issue(task=valid_task)
    assert [problem["code"] for problem in version.problems] == ["cut_off", "degenerate"]
    assert "one sentence appears 20 times" in version.problems[1]["why"] and version.measures["repeats"] == 20
    valid_task.refresh_from_db()
    assert valid_task.state == "needs_review" and valid_task.issue_held_back
    assert not review_queue(user=curator, tasks=Task.objects.all()).exists()
    page = curator_client.get(reverse("tasks:review", args=[valid_task.instance_id])).content.decode()
    assert "Kept out of the review queue" in page and "stopped at its token limit" in page
    curator_client.post(reverse("tasks:issue_admit", args=[valid_task.instance_id]))
    valid_task.refresh_from_db()
    assert not valid_task.issue_held_back and list(review_queue(user=curator, tasks=Task.objects.all())) == [valid_task]
    version.refresh_from_db()
    assert version.admitted_by == curator
    assert "Let into the review queue by carla despite" in curator_client.get(
        reverse("tasks:detail", args=[valid_task.instance_id])).content.decode()


def test_an_issue_is_shown_as_markdown_with_raw_html_and_unsafe_links_inert(valid_task, curator_client):
    from django.urls import reverse

    _record_answer(valid_task, "add() **subtracts** <script>alert(1)</script> [see](javascript:alert(2)) "
                               "![pixel](http://tracker.example/p.png)\n\n```python\nprint(add(2, 3))\n```\n")
    task_backtranslate(task=valid_task)
    assert task_current_issue(task=valid_task).problems == []
    page = curator_client.get(reverse("tasks:detail", args=[valid_task.instance_id])).content.decode()
    rendered = page[page.index('<div class="issue-markdown">'):]
    rendered = rendered[:rendered.index("</div>")]
    assert "<strong>subtracts</strong>" in rendered and '<code class="language-python">print(add(2, 3))' in rendered
    assert "<script>" not in rendered and "&lt;script&gt;" in rendered and 'href="javascript' not in rendered
    assert "<img" not in rendered and "tracker.example" in rendered  # shown as text, never fetched
