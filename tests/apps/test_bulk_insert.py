"""rows_insert stores what bulk_create would, and skips rows that break a unique constraint."""

from datetime import datetime, timedelta, timezone

import pytest
from django.db import transaction
from django.utils import timezone as django_timezone

from apps.bulk_insert import rows_insert
from apps.repositories.models import Commit, Repository
from apps.tasks.models import Task

WHEN = datetime(2025, 3, 4, 5, 6, 7, tzinfo=timezone.utc)


def _commit_row(repository, sha: str, message: str = "Fix ünïcode\n\nbody") -> dict:
    return dict(
        repository_id=repository.id, sha=sha, parent_sha="", author_name="Ann", author_email="ann@example.com",
        authored_at=WHEN, committed_at=WHEN + timedelta(hours=1), message=message,
        source_files=["pkg/a.py", "pkg/ü.py"], test_files=[], other_files=['odd "name".txt'],
        source_file_count=2, test_file_count=0, other_file_count=1, has_binary=False, lines_added=3,
        lines_deleted=1, patch_chars=120, python_change=None, tests_changed=False, drop_reason="",
    )


@pytest.fixture
def repository(db):
    return Repository.objects.create(name="acme/rows", url="/srv/rows")


def test_rows_keep_every_value_and_take_auto_now(repository):
    before = django_timezone.now()
    rows_insert(Commit, [_commit_row(repository, "a" * 40)])
    stored = Commit.objects.get(sha="a" * 40)
    for name, value in _commit_row(repository, "a" * 40).items():
        assert getattr(stored, name) == value, name
    assert before <= stored.mined_at <= django_timezone.now()


def test_fields_left_out_take_their_defaults(repository):
    rows_insert(Commit, [_commit_row(repository, "b" * 40)])
    commit = Commit.objects.get(sha="b" * 40)
    rows_insert(Task, [dict(instance_id="acme__rows-bbbbbbbbbb", repository_id=repository.id, commit_id=commit.id)])
    task = Task.objects.get(commit=commit)
    assert (task.state, task.reason, task.excluded_tests, task.leak_score, task.disagree) == (
        Task.State.MINED, "", [], None, False)
    assert task.created_at == task.updated_at and task.created_at is not None


def test_conflicting_rows_are_skipped_and_the_stored_row_is_kept(repository):
    with transaction.atomic():  # twice in one transaction: the staging table does not linger
        rows_insert(Commit, [_commit_row(repository, "c" * 40, message="first")])
        rows_insert(Commit, [_commit_row(repository, "c" * 40, message="second"),
                             _commit_row(repository, "d" * 40, message="third")])
    assert dict(Commit.objects.values_list("sha", "message")) == {"c" * 40: "first", "d" * 40: "third"}


def test_nothing_to_insert_is_no_query(repository, django_assert_num_queries):
    with django_assert_num_queries(0):
        rows_insert(Commit, [])


def test_rows_the_caller_says_cannot_conflict_go_straight_in(repository):
    from django.db import IntegrityError

    rows_insert(Commit, [_commit_row(repository, "e" * 40), _commit_row(repository, "f" * 40)], conflicts=False)
    assert Commit.objects.get(sha="e" * 40).source_files == ["pkg/a.py", "pkg/ü.py"]
    # Were the caller wrong, the conflict is an error, not a row silently left out.
    with pytest.raises(IntegrityError), transaction.atomic():
        rows_insert(Commit, [_commit_row(repository, "e" * 40, message="again")], conflicts=False)
    assert Commit.objects.get(sha="e" * 40).message != "again"
