"""Curation through the real parts: a reviewer's oracle fix and a bulk action go through Redis to a
worker process, which re-validates in the sandbox and moves the tasks."""

import pytest
from django.test import Client
from django.urls import reverse

from apps.repositories.models import MiningJob
from apps.repositories.services import repository_register
from apps.tasks import review
from apps.tasks.backtranslation import issue_version_edit
from apps.tasks.models import BulkAction, Review, Task, TaskChange, Validation
from apps.tasks.services import task_validation_start
from tests.conftest import mine_now, wait_until
from worker.demo.sample_repo import sample_repo_write

pytestmark = pytest.mark.e2e


def _mined(repository) -> None:
    """Mine in this process, or wait for the worker that took the job first."""
    job = mine_now(repository)
    wait_until(lambda: MiningJob.objects.get(pk=job.pk).state == MiningJob.State.SUCCEEDED, what="mining")


def _latest(task) -> Validation:
    return Validation.objects.filter(task=task).order_by("-created_at", "-id").first()


def test_dropping_a_wrong_test_revalidates_the_task_in_a_worker(celery_worker, tmp_path, curator):
    commits = sample_repo_write(tmp_path / "textkit")
    repository = repository_register(location=str(tmp_path / "textkit"))
    _mined(repository)
    fix = [c for c in commits if c.kind == "fix_with_test"][0]
    task = Task.objects.get(commit__sha=fix.sha)
    task_validation_start(task=task)
    wait_until(lambda: Task.objects.get(id=task.id).state == "valid", timeout=300, what="the first validation")
    first = _latest(task)
    assert first.pass_to_pass, "the suite found Pass-to-Pass tests to drop one of"
    issue_version_edit(task=task, text="Wrapping drops the last word of a paragraph.", user=curator, based_on=0)
    task.refresh_from_db()
    assert task.state == "needs_review"
    review.task_review_submit(task=task, user=curator, form=review.ReviewForm(
        decision="accept", underspecified=0, false_negative=0, difficulty="<15 min fix"))
    assert Task.objects.get(id=task.id).state == "accepted"

    client = Client()
    client.force_login(curator)
    wrong = first.pass_to_pass[0]
    response = client.post(reverse("tasks:test_drop", args=[task.instance_id]), {"test": wrong, "note": "wrong"})
    assert response.status_code == 302
    wait_until(lambda: Task.objects.get(id=task.id).state == "needs_review" and _latest(task) != first
               and _latest(task).state == "succeeded", timeout=300, what="the re-validation")
    again = _latest(task)
    assert again.verdict == "valid" and wrong not in again.pass_to_pass and wrong not in again.fail_to_pass
    assert sorted(again.fail_to_pass) == sorted(first.fail_to_pass)
    task.refresh_from_db()
    assert task.excluded_tests == [wrong] and task.review_count == 0  # accepted before: back to review
    assert not Review.objects.filter(task=task, current=True).exists()
    assert TaskChange.objects.filter(task=task, kind="test_dropped", actor=curator).exists()


def test_a_bulk_reject_and_its_undo_run_in_a_worker(celery_worker, tmp_path, curator):
    sample_repo_write(tmp_path / "textkit")
    repository = repository_register(location=str(tmp_path / "textkit"))
    _mined(repository)
    mined = Task.objects.filter(repository=repository, state="mined").count()
    assert mined > 5
    client = Client()
    client.force_login(curator)
    query = f"repository={repository.pk}&state=mined"
    response = client.post(reverse("tasks:bulk_confirm"), {"action": "reject", "query": query, "expected": str(mined),
                                                           "reject_reason": "trivial", "note": "too small"})
    bulk = BulkAction.objects.get()
    assert response.status_code == 302 and response["Location"] == reverse("tasks:bulk", args=[bulk.pk])
    wait_until(lambda: BulkAction.objects.get(pk=bulk.pk).state == "succeeded", what="the bulk reject")
    assert Task.objects.filter(repository=repository, state="rejected", reason="trivial").count() == mined
    page = client.get(reverse("tasks:bulk", args=[bulk.pk])).content.decode()
    assert 'id="bulk-changed">' + str(mined) in page and 'id="bulk-undo"' in page
    client.post(reverse("tasks:bulk_undo", args=[bulk.pk]))
    wait_until(lambda: BulkAction.objects.get(pk=bulk.pk).state == "undone", what="the undo")
    assert Task.objects.filter(repository=repository, state="mined").count() == mined
