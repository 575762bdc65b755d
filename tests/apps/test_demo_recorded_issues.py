"""An issue text recorded for the demo reaches the review queue through the issue writer's own job,
and every page that says where an issue came from says it was recorded: never a model's, never a
person's."""

import pytest
from django.urls import reverse

from apps.datasets.demo import RECORDED_BACKEND, answer_record
from apps.tasks.backtranslation import ISSUE_WRITER_TOKENS, issue_prompt, task_backtranslate, valid_validation
from apps.tasks.models import IssueVersion, Task, TestRunRecord
from tests.conftest import validation_make

pytestmark = pytest.mark.django_db

RECORDED = ("add() returns the difference of its arguments\n\n`add(2, 3)` gives `-1`; I expected `5`, as the "
            "documentation says it adds.")


@pytest.fixture
def valid_task(small_repository):
    """The fix of add(), validated as valid (its failing run's output kept, as the issue writer reads it)."""
    task = Task.objects.filter(repository=small_repository, commit__message__startswith="Fix add").get()
    validation = validation_make(task, verdict="valid", fail_to_pass=["tests/test_calc.py::test_add"])
    TestRunRecord.objects.create(validation=validation, side="before", scope="selected", status="ok",
                                 output="FAILED tests/test_calc.py::test_add - assert -1 == 5",
                                 outcomes={"tests/test_calc.py::test_add": "FAILED"})
    Task.objects.filter(id=task.id).update(state="valid", verdict="valid")
    task.refresh_from_db()
    return task


def test_a_recorded_issue_reaches_the_queue_and_is_marked_recorded_on_its_pages(curator_client, valid_task):
    prompt, variables = issue_prompt(valid_task, valid_validation(valid_task))
    answer_record(role="issue_writer", prompt=prompt, variables=variables, max_tokens=ISSUE_WRITER_TOKENS,
                  answer=RECORDED, task=valid_task)

    outcome, _, model = task_backtranslate(task=valid_task)  # the issue writer's own path, answered from the record

    issue = IssueVersion.objects.get(task=valid_task)
    assert (outcome, issue.text, issue.model_call.backend) == ("written", RECORDED, RECORDED_BACKEND)
    assert "recorded" in model
    valid_task.refresh_from_db()
    assert valid_task.state == "needs_review" and not valid_task.issue_held_back
    assert curator_client.get(reverse("tasks:queue"))["Location"].startswith(
        reverse("tasks:review", args=[valid_task.instance_id]))

    for page in (reverse("tasks:detail", args=[valid_task.instance_id]),
                 reverse("tasks:review", args=[valid_task.instance_id])):
        html = curator_client.get(page).content.decode()
        assert 'id="issue-recorded"' in html and ">recorded text</span> bundled with the demo, not written" in html
        assert ", written by the issue writer" not in html and 'class="model-name"' not in html
