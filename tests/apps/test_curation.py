"""Curation: the rubric and its merge, accepting and rejecting, holds and the queue, fixing the
oracle, bulk actions with undo, saved views, permissions and what the pages show."""

import re
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from apps.jobs.services import job_run
from apps.tasks import review
from apps.tasks.bulk import bulk_action_start, bulk_action_undo
from apps.tasks.models import (
    BulkAction,
    CurationSettings,
    IssueVersion,
    Review,
    SavedView,
    Task,
    TaskChange,
    TaskHold,
    TaskStateChange,
    Validation,
)
from apps.tasks.states import task_summary_refresh
from tests.conftest import commits_and_tasks_make, task_put_in_review, validation_make

pytestmark = pytest.mark.django_db

ACCEPT = review.ReviewForm(decision="accept", underspecified=0, false_negative=1, difficulty="<15 min fix")


def _reject(reason="tests_too_narrow", **fields):
    return review.ReviewForm(**{"decision": "reject", "underspecified": 1, "false_negative": 3,
                                "difficulty": "15 min - 1 hour", "reject_reason": reason, **fields})


def _curator(name: str) -> User:
    user = User.objects.create_user(username=name, password="pw")
    user.groups.add(Group.objects.get(name="curator"))
    return user


@pytest.fixture
def in_review(small_repository):
    task = Task.objects.filter(repository=small_repository).exclude(commit__parent_sha="").get()
    return task_put_in_review(task)


@pytest.fixture
def queue_tasks(small_repository):
    tasks = commits_and_tasks_make(small_repository, 4)
    return [task_put_in_review(task) for task in tasks]


# --- reviewing ------------------------------------------------------------------------------


def test_a_valid_task_with_an_issue_waits_for_review(in_review):
    assert in_review.state == "needs_review"
    assert list(TaskStateChange.objects.filter(task=in_review).values_list("to_state", flat=True))[-1] == "needs_review"


def test_accept_with_passing_scores_records_the_review_and_its_history(in_review, curator):
    assert review.task_review_submit(task=in_review, user=curator, form=ACCEPT) == "accepted"
    in_review.refresh_from_db()
    assert in_review.state == "accepted" and in_review.review_count == 1
    assert (in_review.underspecified, in_review.false_negative) == (0, 1)
    change = TaskChange.objects.get(task=in_review, kind="reviewed")
    assert change.actor == curator and change.before == {} and change.after["decision"] == "accept"


@pytest.mark.parametrize("underspecified, false_negative", [(2, 0), (0, 2), (3, 3)])
def test_accepting_with_scores_at_the_threshold_is_refused(in_review, curator, underspecified, false_negative):
    form = review.ReviewForm(decision="accept", underspecified=underspecified, false_negative=false_negative,
                             difficulty="1-4 hours")
    with pytest.raises(review.ReviewRefused, match="keep .* out"):
        review.task_review_submit(task=in_review, user=curator, form=form)
    in_review.refresh_from_db()
    assert in_review.state == "needs_review" and not Review.objects.exists()


def test_reject_needs_a_listed_reason_and_other_needs_a_note(in_review, curator):
    with pytest.raises(review.ReviewRefused, match="reason"):
        review.task_review_submit(task=in_review, user=curator, form=_reject(reason="made_up"))
    with pytest.raises(review.ReviewRefused, match="note"):
        review.task_review_submit(task=in_review, user=curator, form=_reject(reason="other"))
    assert review.task_review_submit(task=in_review, user=curator, form=_reject()) == "rejected"
    in_review.refresh_from_db()
    assert (in_review.state, in_review.reason) == ("rejected", "tests_too_narrow")


def test_two_required_reviews_merge_by_the_most_severe_and_disagreements_are_settled(in_review, curator):
    CurationSettings.objects.update_or_create(pk=1, defaults={"required_reviews": 2})
    second, third = _curator("bruno"), _curator("chen")
    assert review.task_review_submit(task=in_review, user=curator, form=ACCEPT) == "pending"
    in_review.refresh_from_db()
    assert in_review.state == "needs_review" and not in_review.disagree
    assert review.task_review_submit(task=in_review, user=second, form=_reject()) == "rejected"
    in_review.refresh_from_db()
    assert in_review.state == "rejected" and in_review.disagree
    assert (in_review.underspecified, in_review.false_negative) == (1, 3)  # the most severe of each
    with pytest.raises(review.ReviewRefused, match="agree"):  # nothing to settle on an agreed task
        other = task_put_in_review(commits_and_tasks_make(in_review.repository, 1)[0])
        review.task_review_submit(task=other, user=third, form=review.ReviewForm(**{**ACCEPT.__dict__, "settle": True}))
    settled = review.task_review_submit(task=in_review, user=third,
                                        form=review.ReviewForm(**{**ACCEPT.__dict__, "settle": True}))
    in_review.refresh_from_db()
    assert settled == "accepted" and in_review.state == "accepted"


def test_a_reviewer_reviewing_again_replaces_their_review(in_review, curator):
    CurationSettings.objects.update_or_create(pk=1, defaults={"required_reviews": 2})
    review.task_review_submit(task=in_review, user=curator, form=ACCEPT)
    review.task_review_submit(task=in_review, user=curator, form=ACCEPT)
    assert Review.objects.filter(task=in_review, current=True).count() == 1
    assert Review.objects.filter(task=in_review).count() == 2
    in_review.refresh_from_db()
    assert in_review.state == "needs_review"  # one reviewer twice is still one review


def test_an_issue_edit_sends_an_accepted_task_back_to_review(in_review, curator):
    from apps.tasks.backtranslation import issue_version_edit

    review.task_review_submit(task=in_review, user=curator, form=ACCEPT)
    issue_version_edit(task=in_review, text="add(2, 3) gives -1 instead of 5", user=curator, based_on=1)
    in_review.refresh_from_db()
    assert in_review.state == "needs_review" and in_review.review_count == 0
    edit = TaskChange.objects.get(task=in_review, kind="issue_edited")
    assert edit.before["text"] == "add() returns the difference" and edit.after["version"] == 2
    assert TaskChange.objects.filter(task=in_review, kind="reviews_retired").exists()


def test_reopen_retires_the_reviews(in_review, curator):
    review.task_review_submit(task=in_review, user=curator, form=_reject())
    review.task_reopen(task=in_review, user=curator)
    in_review.refresh_from_db()
    assert in_review.state == "needs_review" and not Review.objects.filter(task=in_review, current=True).exists()
    with pytest.raises(review.ReviewRefused, match="only accepted or rejected"):
        review.task_reopen(task=in_review, user=curator)


def test_annotators_cannot_decide(in_review, annotator):
    with pytest.raises(review.ReviewRefused, match="curators"):
        review.task_review_submit(task=in_review, user=annotator, form=ACCEPT)


# --- fixing the oracle ----------------------------------------------------------------------


def test_dropping_a_wrong_test_revalidates_without_it(in_review, curator, django_capture_on_commit_callbacks,
                                                      monkeypatch):
    queued = []
    monkeypatch.setattr("apps.jobs.services.job_dispatch", queued.append)
    review.task_review_submit(task=in_review, user=curator, form=ACCEPT)
    with pytest.raises(review.ReviewRefused, match="not among"):
        review.task_test_drop(task=in_review, user=curator, test="tests/test_nothing.py::test_x")
    with django_capture_on_commit_callbacks(execute=True):
        validation = review.task_test_drop(task=in_review, user=curator, test="tests/test_other.py::test_ok",
                                           note="checks the log format, not the fix")
    in_review.refresh_from_db()
    assert in_review.excluded_tests == ["tests/test_other.py::test_ok"]
    assert in_review.state == "building" and queued == [validation.job_id]
    change = TaskChange.objects.get(task=in_review, kind="test_dropped")
    assert change.after == {"excluded_tests": ["tests/test_other.py::test_ok"]} and change.note
    assert not Review.objects.filter(task=in_review, current=True).exists()  # what they reviewed changed


def test_the_engine_leaves_excluded_tests_out_of_the_oracle():
    from worker.engine.grade.oracle import Oracle, oracle_without

    oracle = Oracle(["a", "b"], ["c", "d"], ["e"], [])
    assert oracle_without(oracle, {"b", "d"}) == Oracle(["a"], ["c"], ["e"], [])
    assert oracle_without(oracle, ()) is oracle


# --- the queue and holds --------------------------------------------------------------------


def test_two_reviewers_taking_from_the_queue_get_different_tasks(queue_tasks, curator):
    other = _curator("bruno")
    tasks = Task.objects.filter(repository=queue_tasks[0].repository)
    first = review.review_queue_next(user=curator, tasks=tasks)
    second = review.review_queue_next(user=other, tasks=tasks)
    assert first and second and first != second
    assert TaskHold.objects.get(task=first).user == curator
    # Asking again keeps to one hold per reviewer, and skipping passes over the current task.
    third = review.review_queue_next(user=curator, tasks=tasks, skip=first.id)
    assert third not in (first, second) and TaskHold.objects.filter(user=curator).count() == 1


def test_an_expired_hold_is_taken_over_and_reviewed_tasks_leave_the_queue(queue_tasks, curator):
    other = _curator("bruno")
    tasks = Task.objects.filter(id__in=[queue_tasks[0].id])
    assert review.review_queue_next(user=curator, tasks=tasks) == queue_tasks[0]
    assert review.review_queue_next(user=other, tasks=tasks) is None  # held
    TaskHold.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    assert review.review_queue_next(user=other, tasks=tasks) == queue_tasks[0]
    CurationSettings.objects.update_or_create(pk=1, defaults={"required_reviews": 2})
    review.task_review_submit(task=queue_tasks[0], user=other, form=ACCEPT)
    assert review.review_queue_next(user=other, tasks=tasks) is None  # they reviewed it; it waits for another
    assert not TaskHold.objects.exists()  # a decision releases the hold


# --- pages ----------------------------------------------------------------------------------


def test_the_review_page_shows_everything_a_reviewer_judges_and_renders_text_inert(curator_client, in_review,
                                                                                   curator):
    IssueVersion.objects.create(task=in_review, number=2, author="person", edited_by=curator,
                                text="<script>alert('issue')</script> add is wrong", leak_score=0.9)
    in_review.commit.message = "Fix add <img src=x onerror=alert(1)>"
    in_review.commit.save()
    page = curator_client.get(reverse("tasks:review", args=[in_review.instance_id])).content.decode()
    assert "<script>alert" not in page and "<img src=x" not in page
    assert "&lt;script&gt;alert(&#x27;issue&#x27;)&lt;/script&gt;" in page
    commit_message = re.search(r'<pre class="message-text" id="commit-message">(.*?)</pre>', page, re.S).group(1)
    assert "Fix add &lt;img" in commit_message
    assert "leaks the fix" in page and 'id="leak-score">0.90' in page
    assert "tests/test_calc.py::test_add" in page and "tests/test_other.py::test_ok" in page
    assert "before run output" in page  # the runs' logs
    assert 'class="highlight"' in page and "lib/calc.py" in page  # the gold patch, highlighted
    assert "Is the issue well specified?" in page and 'id="accept"' in page and 'id="reject"' in page
    assert "Take this wrong test out of the oracle" in page
    assert not TaskHold.objects.exists()  # reading it from the list holds nothing
    curator_client.get(reverse("tasks:review", args=[in_review.instance_id]) + "?queue=1")
    assert TaskHold.objects.get(task=in_review).user == curator  # in the queue, opening it holds it
    split = curator_client.get(reverse("tasks:review", args=[in_review.instance_id]) + "?diff=split&lines=all")
    assert 'class="split-diff highlight"' in split.content.decode()


def test_accepting_through_the_page_goes_to_the_next_task_in_the_queue(curator_client, queue_tasks):
    response = curator_client.get(reverse("tasks:queue"))
    first = Task.objects.get(hold__isnull=False)
    assert response.status_code == 302 and first.instance_id in response["Location"]
    response = curator_client.post(reverse("tasks:review_submit", args=[first.instance_id]), {
        "decision": "accept", "underspecified": "0", "false_negative": "0", "difficulty": "<15 min fix",
        "queue": "1"})
    assert response.status_code == 302 and response["Location"] == reverse("tasks:queue") + f"?skip={first.id}"
    first.refresh_from_db()
    assert first.state == "accepted"
    following = curator_client.get(response["Location"])
    assert following.status_code == 302 and first.instance_id not in following["Location"]


def test_a_refused_decision_keeps_what_was_entered_and_says_why(curator_client, in_review):
    response = curator_client.post(reverse("tasks:review_submit", args=[in_review.instance_id]), {
        "decision": "accept", "underspecified": "3", "false_negative": "0", "difficulty": "1-4 hours",
        "other_problems": "the issue names the wrong function"})
    page = response.content.decode()
    assert response.status_code == 400 and "keep" in page and "the issue names the wrong function" in page
    assert re.search(r'value="3"[^>]*checked', page)
    in_review.refresh_from_db()
    assert in_review.state == "needs_review"


def test_annotators_read_but_every_decision_is_refused(annotator_client, in_review):
    assert annotator_client.get(reverse("tasks:review", args=[in_review.instance_id])).status_code == 200
    assert 'id="accept"' not in annotator_client.get(reverse("tasks:review", args=[in_review.instance_id])).content.decode()
    for name, data in [("tasks:review_submit", {"decision": "accept", "underspecified": "0", "false_negative": "0",
                                                "difficulty": "<15 min fix"}),
                       ("tasks:reopen", {}), ("tasks:test_drop", {"test": "tests/test_calc.py::test_add"})]:
        assert annotator_client.post(reverse(name, args=[in_review.instance_id]), data).status_code == 403
    assert annotator_client.get(reverse("tasks:queue")).status_code == 403
    assert annotator_client.post(reverse("tasks:bulk_confirm"), {"action": "reject", "query": ""}).status_code == 403
    in_review.refresh_from_db()
    assert in_review.state == "needs_review"


def test_the_empty_queue_says_why(curator_client, in_review, curator):
    TaskHold.objects.create(task=in_review, user=_curator("bruno"), expires_at=timezone.now() + timedelta(minutes=5))
    page = curator_client.get(reverse("tasks:queue")).content.decode()
    assert "Nothing left for you to review" in page and "1 of them is held by other reviewers" in page


def test_the_list_filters_sorts_and_counts(curator_client, queue_tasks, curator):
    review.task_review_submit(task=queue_tasks[0], user=curator, form=_reject())
    Task.objects.filter(id=queue_tasks[1].id).update(leak_score=0.9, flaky_count=2)
    url = reverse("tasks:all")
    page = curator_client.get(url, {"state": "rejected"}).content.decode()
    assert queue_tasks[0].instance_id in page and queue_tasks[2].instance_id not in page
    assert "Rejected (1)" in page and "Waiting for review (3)" in page.replace("Needs Review", "Waiting for review")
    page = curator_client.get(url, {"leak": "flagged", "flaky": "yes"}).content.decode()
    assert queue_tasks[1].instance_id in page and queue_tasks[0].instance_id not in page
    page = curator_client.get(url, {"reviewer": str(curator.pk), "false_negative_min": "3"}).content.decode()
    assert queue_tasks[0].instance_id in page and queue_tasks[1].instance_id not in page
    page = curator_client.get(url, {"q": "bug number 2"}).content.decode()
    assert queue_tasks[2].instance_id in page and queue_tasks[3].instance_id not in page
    page = curator_client.get(url, {"sort": "-leak", "state": "needs_review"}).content.decode()
    assert page.index(queue_tasks[1].instance_id) < page.index(queue_tasks[2].instance_id)
    assert curator_client.get(url, {"f2p_min": "many", "sort": "nonsense"}).status_code == 200  # bad values ignored


def test_pages_take_a_fixed_number_of_queries(curator_client, small_repository, django_assert_max_num_queries):
    tasks = [task_put_in_review(task) for task in commits_and_tasks_make(small_repository, 30)]
    with django_assert_max_num_queries(12):
        assert curator_client.get(reverse("tasks:all")).status_code == 200
    with django_assert_max_num_queries(32):
        assert curator_client.get(reverse("tasks:review", args=[tasks[0].instance_id])).status_code == 200


def test_list_queries_do_not_grow_with_the_page(curator_client, small_repository, django_assert_num_queries):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    commits_and_tasks_make(small_repository, 5)
    curator_client.get(reverse("tasks:all"))  # the reasons and reviewers it caches for a minute
    with CaptureQueriesContext(connection) as few:
        curator_client.get(reverse("tasks:all"))
    commits_and_tasks_make(small_repository, 40, start=100)
    with CaptureQueriesContext(connection) as many:
        curator_client.get(reverse("tasks:all"))
    assert len(many.captured_queries) == len(few.captured_queries)


def test_saved_views_keep_the_filters_and_shared_ones_show_to_everyone(curator_client, annotator_client, curator):
    curator_client.post(reverse("tasks:view_create"), {"name": "Leaky", "query": "leak=flagged&state=needs_review",
                                                       "shared": "1"})
    view = SavedView.objects.get(name="Leaky")
    assert view.user == curator and view.query == "leak=flagged&state=needs_review"
    page = annotator_client.get(reverse("tasks:all")).content.decode()
    assert "?leak=flagged&amp;state=needs_review" in page and "shared by carla" in page
    assert annotator_client.post(reverse("tasks:view_delete", args=[view.pk])).status_code == 404
    assert curator_client.post(reverse("tasks:view_delete", args=[view.pk])).status_code == 302
    assert not SavedView.objects.exists()


# --- bulk actions ---------------------------------------------------------------------------


def test_a_bulk_reject_says_its_count_runs_on_every_page_and_is_undone(curator_client, small_repository, curator,
                                                                         monkeypatch):
    monkeypatch.setattr("apps.jobs.services.job_dispatch", lambda job_id: None)
    tasks = commits_and_tasks_make(small_repository, 60)
    Task.objects.filter(id__in=[t.id for t in tasks[:55]]).update(state="environment_failed", reason="install_failed")
    query = f"repository={small_repository.pk}&state=environment_failed"
    page = curator_client.post(reverse("tasks:bulk_confirm"), {"action": "reject", "query": query}).content.decode()
    assert "<strong>55</strong> tasks" in page  # more than one page of the list (50)
    response = curator_client.post(reverse("tasks:bulk_confirm"), {
        "action": "reject", "query": query, "expected": "55", "reject_reason": "environment_broken"})
    bulk = BulkAction.objects.get()
    assert response.status_code == 302 and bulk.state == "queued"
    job_run(job_id=bulk.job_id)
    job_run(job_id=bulk.job_id)  # a redelivery changes nothing
    bulk.refresh_from_db()
    assert bulk.state == "succeeded" and len(bulk.changed) == 55
    assert Task.objects.filter(state="rejected", reason="environment_broken").count() == 55
    assert TaskStateChange.objects.filter(to_state="rejected", actor=curator).count() == 55
    # Someone reopens one meanwhile: the undo leaves that one where they put it.
    moved = Task.objects.filter(state="rejected").first()
    review.task_reopen(task=moved, user=curator)
    bulk_action_undo(bulk=bulk, user=curator)
    bulk.refresh_from_db()
    job_run(job_id=bulk.undo_job_id)
    bulk.refresh_from_db()
    assert bulk.state == "undone"
    assert Task.objects.filter(state="environment_failed", reason="install_failed").count() == 54
    moved.refresh_from_db()
    assert moved.state == "needs_review"


def test_a_bulk_action_refuses_when_the_query_changed_since_the_count(small_repository, curator):
    commits_and_tasks_make(small_repository, 3)
    with pytest.raises(review.ReviewRefused, match="now matches"):
        bulk_action_start(user=curator, action="reject", filters={"repository": small_repository.pk}, query="",
                          expected=2, reject_reason="trivial")
    with pytest.raises(review.ReviewRefused, match="reason"):
        bulk_action_start(user=curator, action="reject", filters={}, query="", expected=3)


def test_a_bulk_action_refuses_when_other_tasks_took_the_counted_ones_place(curator_client, small_repository):
    tasks = commits_and_tasks_make(small_repository, 4)
    Task.objects.filter(id__in=[t.id for t in tasks[:3]]).update(state="invalid", reason="no_fail_to_pass")
    query = f"repository={small_repository.pk}&state=invalid"
    page = curator_client.post(reverse("tasks:bulk_confirm"), {"action": "reject", "query": query}).content.decode()
    digest = re.search(r'name="targets" value="([0-9a-f]{16})"', page).group(1)
    # One counted task leaves the query and another comes in: the same count, other tasks.
    Task.objects.filter(id=tasks[0].id).update(state="accepted")
    Task.objects.filter(id=tasks[3].id).update(state="invalid", reason="no_fail_to_pass")
    response = curator_client.post(reverse("tasks:bulk_confirm"), {
        "action": "reject", "query": query, "expected": "3", "targets": digest, "reject_reason": "trivial"},
        follow=True)
    assert "but not the same ones as when you confirmed" in response.content.decode()
    assert not BulkAction.objects.exists() and not Task.objects.filter(state="rejected").exists()


def test_the_bulk_confirmation_names_the_filters_and_a_count_other_than_the_list_showed(curator_client,
                                                                                        small_repository):
    tasks = commits_and_tasks_make(small_repository, 5)
    Task.objects.filter(id__in=[t.id for t in tasks[:2]]).update(state="invalid", reason="no_fail_to_pass")
    query = f"q=bug&repository={small_repository.pk}&state=invalid"
    page = curator_client.post(reverse("tasks:bulk_confirm"), {"action": "reject", "query": query, "shown": "2"})
    assert 'id="bulk-shown-differs"' not in page.content.decode()
    filters = re.search(r'<p id="bulk-filters">(.*?)</p>', page.content.decode()).group(1)
    assert re.sub(r"<[^>]+>", "", filters) == (f"The list's filters: Search bug · Repository {small_repository.name} · "
                                               f"State Invalid.")
    Task.objects.filter(id=tasks[2].id).update(state="invalid", reason="no_fail_to_pass")
    page = curator_client.post(reverse("tasks:bulk_confirm"), {"action": "reject", "query": query, "shown": "2"})
    assert "The list showed 2 tasks for these filters; they match 3 now." in page.content.decode()


def test_the_list_gives_its_tools_the_filters_of_the_results_it_swaps_in(curator_client, small_repository):
    """The saved-view and bulk forms sit outside the results htmx replaces: the query they post is
    carried in the results, tied to each form by its id."""
    response = curator_client.get(reverse("tasks:all") + "?state=mined", headers={"HX-Request": "true"})
    results = response.content.decode()
    assert results.lstrip().startswith('<div id="task-results">')
    for form in ("view-form", "bulk-form"):
        assert f'<input type="hidden" form="{form}" name="query" value="state=mined">' in results
    full = curator_client.get(reverse("tasks:all") + "?state=mined").content.decode()
    assert 'id="view-form"' in full and 'id="bulk-form"' in full
    assert re.search(r'<form[^>]*id="bulk-form"[^>]*>(?:(?!</form>).)*name="query"', full, re.S) is None


# --- the dashboard --------------------------------------------------------------------------


def test_the_dashboard_shows_funnel_reasons_throughput_and_agreement(curator_client, queue_tasks, curator):
    CurationSettings.objects.update_or_create(pk=1, defaults={"required_reviews": 2})
    other = _curator("bruno")
    review.task_review_submit(task=queue_tasks[0], user=curator, form=ACCEPT)
    review.task_review_submit(task=queue_tasks[0], user=other, form=ACCEPT)
    review.task_review_submit(task=queue_tasks[1], user=curator, form=ACCEPT)
    review.task_review_submit(task=queue_tasks[1], user=other, form=_reject())
    page = curator_client.get(reverse("tasks:dashboard")).content.decode()
    assert 'id="agreement">50%' in page and "1 disagreement to settle" in page
    assert re.search(r"Accepted</th><td class=\"num\">1<", page)
    assert "tests_too_narrow" in page
    rows = re.search(r'<table class="table" id="reviewers">.*?</table>', page, re.S).group(0)
    assert "carla" in rows and "bruno" in rows


def test_an_annotator_sees_no_decision_links_in_the_navigation(annotator_client):
    page = annotator_client.get(reverse("tasks:all")).content.decode()
    assert 'id="nav-queue"' not in page and "Bulk action" not in page


def test_validation_results_refresh_the_list_summary(in_review):
    Validation.objects.filter(task=in_review).update(flaky=["tests/test_x.py::test_flaky"])
    task_summary_refresh(in_review.id)
    in_review.refresh_from_db()
    assert (in_review.verdict, in_review.fail_to_pass_count, in_review.flaky_count) == ("valid", 1, 1)
    assert in_review.leak_score == pytest.approx(0.1)


def test_a_logged_out_visitor_is_sent_to_login(in_review):
    response = Client().get(reverse("tasks:review", args=[in_review.instance_id]))
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_dropping_a_generated_test_rechecks_the_kept_generated_files(in_review, curator, monkeypatch,
                                                                    django_capture_on_commit_callbacks):
    from apps.tasks.models import GeneratedTest

    monkeypatch.setattr("apps.jobs.services.job_dispatch", lambda job_id: None)
    from apps.environments.models import Environment

    base = Validation.objects.get(task=in_review)
    environment = Environment.objects.create(key="env-generated", python_version="3.11", lock="", path="/envs/x",
                                             repository=in_review.repository)
    Validation.objects.filter(pk=base.pk).update(verdict="invalid", reason="no_fail_to_pass", environment=environment)
    generated = validation_make(
        in_review, verdict="valid", generated=True, backend="local",
        fail_to_pass=["test_commitgym_generated_1.py::test_a", "test_commitgym_generated_1.py::test_b"])
    GeneratedTest.objects.create(task=in_review, validation=generated, index=1, content="def test_a(): ...",
                                 state="kept", fail_to_pass=generated.fail_to_pass)
    GeneratedTest.objects.create(task=in_review, validation=generated, index=2, content="def test_c(): ...",
                                 state="dropped", reason="passes_before")
    with django_capture_on_commit_callbacks(execute=True):
        again = review.task_test_drop(task=in_review, user=curator, test="test_commitgym_generated_1.py::test_b")
    assert again.generated and again.state == "queued" and again.environment == environment
    assert list(GeneratedTest.objects.filter(validation=again).values_list("content", "state")) == [
        ("def test_a(): ...", "pending")]  # only the kept file is checked again
    in_review.refresh_from_db()
    assert in_review.excluded_tests == ["test_commitgym_generated_1.py::test_b"]


def test_a_reopened_task_comes_back_to_its_earlier_reviewer(queue_tasks, curator):
    CurationSettings.objects.update_or_create(pk=1, defaults={"required_reviews": 2})
    other, task = _curator("bruno"), queue_tasks[0]
    tasks = Task.objects.filter(id=task.id)
    review.task_review_submit(task=task, user=curator, form=_reject())
    review.task_reopen(task=task, user=curator)
    review.task_review_submit(task=task, user=other, form=ACCEPT)
    assert review.review_queue_next(user=curator, tasks=tasks) == task  # their old review no longer counts


def test_settling_ends_the_disagreement(in_review, curator):
    CurationSettings.objects.update_or_create(pk=1, defaults={"required_reviews": 2})
    review.task_review_submit(task=in_review, user=curator, form=ACCEPT)
    review.task_review_submit(task=in_review, user=_curator("bruno"), form=_reject())
    settle = review.ReviewForm(**{**ACCEPT.__dict__, "settle": True})
    review.task_review_submit(task=in_review, user=_curator("chen"), form=settle)
    in_review.refresh_from_db()
    assert in_review.state == "accepted" and not in_review.disagree
    with pytest.raises(review.ReviewRefused, match="nothing to settle"):
        review.task_review_submit(task=in_review, user=_curator("dora"),
                                  form=review.ReviewForm(**{**_reject().__dict__, "settle": True}))


def test_a_bulk_reject_undone_puts_accepted_tasks_back_and_only_its_owner_undoes_it(small_repository, curator,
                                                                                     monkeypatch):
    monkeypatch.setattr("apps.jobs.services.job_dispatch", lambda job_id: None)
    tasks = [task_put_in_review(task) for task in commits_and_tasks_make(small_repository, 3)]
    for task in tasks:
        review.task_review_submit(task=task, user=curator, form=ACCEPT)
    bulk = bulk_action_start(user=curator, action="reject", filters={"state": "accepted"}, query="state=accepted",
                             expected=3, reject_reason="trivial")
    job_run(job_id=bulk.job_id)
    assert Task.objects.filter(state="rejected").count() == 3
    stranger = Client()
    stranger.force_login(_curator("bruno"))
    assert stranger.get(reverse("tasks:bulk", args=[bulk.pk])).status_code == 404
    assert stranger.post(reverse("tasks:bulk_undo", args=[bulk.pk])).status_code == 404
    bulk.refresh_from_db()
    bulk_action_undo(bulk=bulk, user=curator)
    bulk.refresh_from_db()
    job_run(job_id=bulk.undo_job_id)
    assert Task.objects.filter(state="accepted").count() == 3
    assert TaskStateChange.objects.filter(reason="undo_bulk_reject", actor=curator).count() == 3


def test_odd_input_gets_an_answer_not_an_error(curator_client, in_review):
    assert curator_client.get(reverse("tasks:queue"), {"skip": "\u00b2", "repository": "\u00b2"}).status_code == 302
    response = curator_client.post(reverse("tasks:view_create"), {"name": "nul\x00name", "query": "q=\x00"})
    assert response.status_code == 302 and SavedView.objects.get().name == "nulname"
    response = curator_client.post(reverse("tasks:bulk_confirm"), {"action": "reject", "query": "", "expected": "x",
                                                                   "reject_reason": "trivial"})
    assert response.status_code == 200 and not BulkAction.objects.exists()


def test_the_task_page_lists_each_review_and_the_history_is_in_words(curator_client, in_review, curator):
    other = _curator("olga")
    assert review.task_review_submit(task=in_review, user=other, form=_reject(note="only checks one value")) == \
        "rejected"
    review.task_reopen(task=in_review, user=curator)
    assert review.task_review_submit(task=in_review, user=curator, form=review.ReviewForm(
        decision="accept", underspecified=1, false_negative=0, difficulty="1-4 hours", note="clearer now")) == \
        "accepted"
    page = curator_client.get(reverse("tasks:detail", args=[in_review.instance_id])).content.decode()
    reviews = page[page.index('id="reviews"'):page.index('id="history"')]
    assert "olga" in reviews and "Rejected it (The tests would reject a correct fix that differs" in reviews
    assert "issue underspecified 1/3, tests could reject a valid fix 0/3, 1-4 hours" in reviews
    assert "clearer now" in reviews and "only checks one value" in reviews and "(no longer counts)" in reviews
    assert reverse("tasks:review", args=[in_review.instance_id]) in reviews
    history = page[page.index('id="history"'):]
    assert "moved it from valid to needs review" in history and "moved it from rejected to needs review" in history
    assert "reviewed: accepted it; issue underspecified 1/3, tests could reject a valid fix 0/3, 1-4 hours" in history
    assert "1 review no longer counts" in history
    # Nowhere a stored record as it is kept.
    review_page = curator_client.get(reverse("tasks:review", args=[in_review.instance_id])).content.decode()
    for text in (page, review_page):
        assert "{&#x27;decision&#x27;" not in text and "'decision':" not in text


def test_rejecting_needs_a_reason_only_and_accepting_the_whole_rubric(curator_client, in_review, curator):
    page = reverse("tasks:review_submit", args=[in_review.instance_id])
    # The review page asks no radio button to be filled before a rejection goes out.
    rubric = curator_client.get(reverse("tasks:review", args=[in_review.instance_id])).content.decode()
    assert 'type="radio"' in rubric and not re.search(r'type="radio"[^>]* required', rubric)
    refused = curator_client.post(page, {"decision": "accept", "underspecified": "0", "difficulty": "<15 min fix"})
    assert "Accepting needs the whole rubric: answer could the tests reject a valid solution." in \
        refused.content.decode()
    in_review.refresh_from_db()
    assert in_review.state == "needs_review" and not Review.objects.exists()
    rejected = curator_client.post(page, {"decision": "reject", "reject_reason": "tests_too_narrow"})
    assert rejected.status_code == 302
    in_review.refresh_from_db()
    kept = Review.objects.get()
    assert (in_review.state, kept.underspecified, kept.false_negative, kept.difficulty) == ("rejected", None, None, "")
    assert in_review.underspecified is None and in_review.review_count == 1


def test_the_task_list_says_what_its_numbers_are(curator_client, small_repository, in_review, curator):
    review.task_review_submit(task=in_review, user=curator, form=review.ReviewForm(
        decision="reject", reject_reason="tests_too_narrow"))
    [never_validated] = commits_and_tasks_make(small_repository, 1)
    page = curator_client.get(reverse("tasks:all")).content.decode()
    assert 'id="task-list-legend"' in page and "each 0 (best) to 3 (worst)" in page
    row = page[page.index(never_validated.instance_id):].split("</tr>")[0]
    assert '<td class="num">—</td>' in row  # F2P of a task never validated
    reviewed = page[page.index(in_review.instance_id):].split("</tr>")[0]
    assert "<td>1 · –/–" in reviewed  # a rejection that scored nothing


def test_a_bulk_validate_shows_its_validations_until_they_end(curator_client, small_repository, curator,
                                                             monkeypatch):
    from apps.jobs.models import Job

    monkeypatch.setattr("apps.jobs.services.job_dispatch", lambda job_id: None)
    tasks = commits_and_tasks_make(small_repository, 3)
    query = f"repository={small_repository.pk}&state=mined"
    expected = Task.objects.filter(repository=small_repository, state="mined").count()
    curator_client.post(reverse("tasks:bulk_confirm"), {"action": "validate", "query": query,
                                                       "expected": str(expected)})
    bulk = BulkAction.objects.get()
    job_run(job_id=bulk.job_id)
    bulk.refresh_from_db()
    assert bulk.job.state == "succeeded" and len(bulk.changed) == expected
    page = curator_client.get(reverse("tasks:bulk", args=[bulk.pk])).content.decode()
    # The action's own job is done, but nothing is validated yet: it says so, and keeps polling.
    assert 'id="bulk-state">running its jobs' in page and 'hx-trigger="every 2s"' in page
    assert f"{expected} queued · 0 running · 0 finished · 0 failed of {expected}" in page
    listing = curator_client.get(reverse("tasks:all")).content.decode()  # its recent bulk actions
    assert f'<span class="bulk-summary">running its jobs: 0 of {expected} jobs ended</span>' in listing
    started = Job.objects.filter(kind="validation", subject_id__in=[t.id for t in tasks])
    Job.objects.filter(id=started.first().id).update(state="failed")
    Job.objects.filter(id__in=started.values("id")[1:]).update(state="succeeded")
    Job.objects.filter(kind="validation", state="queued").update(state="succeeded")
    page = curator_client.get(reverse("tasks:bulk", args=[bulk.pk])).content.decode()
    assert f"0 queued · 0 running · {expected - 1} finished · 1 failed of {expected}" in page
    assert 'id="bulk-state">succeeded' in page and "every 2s" not in page
    listing = curator_client.get(reverse("tasks:all")).content.decode()
    assert f'<span class="bulk-summary">succeeded: {expected} of {expected} jobs ended, 1 failed</span>' in listing


def test_the_repository_page_offers_its_tasks_actions_with_counts_and_follows_their_jobs(
        curator_client, small_repository, in_review, monkeypatch):
    from apps.jobs.models import Job
    from apps.llm.models import LanguageJob

    monkeypatch.setattr("apps.jobs.services.job_dispatch", lambda job_id: None)
    waiting = commits_and_tasks_make(small_repository, 2)
    valid = commits_and_tasks_make(small_repository, 1, start=10)[0]
    Task.objects.filter(id=valid.id).update(state="valid")
    page = curator_client.get(reverse("repositories:detail", args=[small_repository.pk])).content.decode()
    mined = Task.objects.filter(repository=small_repository, state="mined").count()
    assert mined >= len(waiting)
    assert f"Validate waiting tasks ({mined})" in page and "Write issues for valid tasks (1)" in page
    assert 'id="act-generate_tests" disabled' in page  # nothing to generate tests for
    act = reverse("tasks:repository_act", args=[small_repository.pk])
    # A count that changed since the page was shown is refused, saying so.
    refused = curator_client.post(act, {"action": "write_issues", "expected": "5"}, follow=True).content.decode()
    assert "Nothing started: The query now matches 1 tasks it can write issues, not 5" in refused
    response = curator_client.post(act, {"action": "write_issues", "expected": "1"})
    bulk = BulkAction.objects.get(action="write_issues")
    assert response["Location"] == reverse("tasks:bulk", args=[bulk.pk])
    job_run(job_id=bulk.job_id)
    assert LanguageJob.objects.get(task=valid).kind == "backtranslate"
    detail = curator_client.get(reverse("tasks:bulk", args=[bulk.pk])).content.decode()
    assert "1 queued · 0 running · 0 finished · 0 failed of 1" in detail and "?kind=backtranslate" in detail
    page = curator_client.get(reverse("repositories:detail", args=[small_repository.pk])).content.decode()
    assert '<span class="bulk-summary">running its jobs: 0 of 1 jobs ended</span>' in page
    Job.objects.filter(kind="backtranslate").update(state="succeeded")
    page = curator_client.get(reverse("repositories:detail", args=[small_repository.pk])).content.decode()
    assert "Write issues for valid tasks (1)" in page  # its issue is not written here: the job was faked
    assert reverse("tasks:bulk", args=[bulk.pk]) in page and "1 started" in page
    assert '<span class="bulk-summary">succeeded: 1 of 1 jobs ended</span>' in page


def test_the_dashboard_charts_reviews_and_acceptance_per_week_with_the_numbers_beside(curator_client, in_review,
                                                                                      curator):
    from datetime import timedelta

    from django.utils import timezone

    review.task_review_submit(task=in_review, user=curator, form=ACCEPT)
    other = commits_and_tasks_make(in_review.repository, 1, start=30)[0]
    Review.objects.create(task=other, reviewer=curator, decision="reject", reject_reason="tests_too_narrow")
    Review.objects.filter(task=other).update(created_at=timezone.now() - timedelta(weeks=2))
    page = curator_client.get(reverse("tasks:dashboard")).content.decode()
    weeks = page[page.index('id="review-weeks"'):]
    assert weeks.count('<svg class="chart"') == 2 and "Reviews per week" in weeks
    rows = re.findall(r'<tr><td class="nowrap">([0-9-]+)</td><td class="num">(\d+)</td><td class="num">(\d+)</td>'
                      r'<td class="num">([^<]+)</td></tr>', weeks)
    assert len(rows) == 12 and rows[-1][1:] == ("1", "1", "1.00") and rows[-3][1:] == ("1", "0", "0.00")
    assert rows[0][1:] == ("0", "0", "—")
