"""The API: tokens and sessions, the pages' roles and visibility, cursor pages, filters, the one
shape of errors, and each operation's answer against its schema (tests/apps/api_calls.py)."""

import ast
import json
from pathlib import Path

import pytest
from django.contrib.auth.models import Group
from django.core.management import call_command
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from apps.accounts.models import ApiToken
from apps.datasets.models import Candidate, Dataset
from apps.labels.models import Label
from apps.tasks.models import Task
from apps.accounts.tokens import api_token_create
from apps.jobs.models import Job
from apps.repositories.models import Commit, MiningJob, Repository
from tests.apps.api_calls import api_call, api_operations, jobs_not_sent  # noqa: F401 - a fixture
from tests.conftest import commits_and_tasks_make, mining_job_make, user_with_role
from tests.gitrepo import GitRepo


def bearer(user, name="script") -> dict:
    _, plain = api_token_create(user=user, name=name)
    return {"HTTP_AUTHORIZATION": f"Bearer {plain}"}


@pytest.fixture
def curator_token(curator):
    return bearer(curator)


# --- tokens ---------------------------------------------------------------------------------------


def test_a_token_is_shown_once_kept_hashed_and_refused_once_revoked(curator, curator_client, small_repository):
    page = curator_client.post(reverse("accounts:tokens"), {"name": "agent cluster"})
    assert page.status_code == 200 and page["Cache-Control"] == "no-store"
    plain = page.content.decode().split('id="token-secret">')[1].split("<")[0]
    token = ApiToken.objects.get(user=curator)
    assert plain.startswith(f"cg_{token.prefix}_") and plain not in token.digest and len(token.digest) == 64
    assert plain not in curator_client.get(reverse("accounts:tokens")).content.decode()  # never again

    client = Client()
    auth = {"HTTP_AUTHORIZATION": f"Bearer {plain}"}
    listed = api_call(client, "repositories_list", status=200, **auth)
    assert [r["name"] for r in listed["results"]] == [small_repository.name]
    token.refresh_from_db()
    assert token.last_used_at is not None

    assert curator_client.post(reverse("accounts:token_revoke", args=[token.pk])).status_code == 302
    refused = api_call(client, "repositories_list", status=401, **auth)
    assert refused["error"] == "authentication_failed" and "revoked" in refused["detail"]
    wrong = api_call(client, "repositories_list", status=401, HTTP_AUTHORIZATION=plain[:-2] + "xx")
    assert wrong["error"] == "not_authenticated"  # not a Bearer header at all: no credentials
    forged = api_call(client, "repositories_list", status=401, HTTP_AUTHORIZATION=f"Bearer {plain[:-2]}xx")
    assert forged["error"] == "authentication_failed"


def test_a_token_needs_a_name_and_another_persons_token_cannot_be_revoked(curator, curator_client, annotator):
    page = curator_client.post(reverse("accounts:tokens"), {"name": "  "})
    assert page.status_code == 400 and "Name the token" in page.content.decode()
    assert not ApiToken.objects.exists()
    theirs, _ = api_token_create(user=annotator, name="theirs")
    assert curator_client.post(reverse("accounts:token_revoke", args=[theirs.pk])).status_code == 404
    theirs.refresh_from_db()
    assert theirs.is_active


def test_no_credentials_is_401_in_the_errors_shape_not_the_login_page(db):
    body = api_call(Client(), "repositories_list", status=401)
    assert body == {"error": "not_authenticated", "detail": "Authentication credentials were not provided.",
                    "fields": {}}


def test_an_address_the_api_does_not_have_is_a_404_in_its_shape(db):
    response = Client().get("/api/v1/reposit0ries/")
    assert response.status_code == 404 and response.json() == {
        "error": "not_found", "detail": "No such address in the API: /api/v1/reposit0ries/", "fields": {}}


def test_a_session_reads_and_writes_only_with_its_csrf_token(curator, small_repository):
    client = Client(enforce_csrf_checks=True)
    client.force_login(curator)
    api_call(client, "repositories_retrieve", small_repository.pk, status=200)
    refused = api_call(client, "repositories_mine_create", small_repository.pk, status=403)
    assert refused["error"] == "permission_denied" and "CSRF" in refused["detail"]


# --- roles and visibility -------------------------------------------------------------------------


def test_an_annotator_reads_but_neither_registers_mines_nor_deletes(annotator, small_repository, git_repo):
    auth = bearer(annotator)
    client = Client()
    api_call(client, "repositories_retrieve", small_repository.pk, status=200, **auth)
    for operation, args, data in (("repositories_mine_create", [small_repository.pk], None),
                                  ("repositories_destroy", [small_repository.pk], None),
                                  ("repositories_create", [], {"location": str(git_repo.path)})):
        body = api_call(client, operation, *args, status=403, data=data, **auth)
        assert body["error"] == "permission_denied" and "curators" in body["detail"]
    assert Repository.objects.count() == 1 and MiningJob.objects.count() == 1  # the fixture's own mining


def test_a_repository_of_a_group_is_invisible_to_others_404_not_403(curator, small_repository, annotator):
    small_repository.allowed_groups.set([Group.objects.create(name="secret-team")])
    client, auth = Client(), bearer(annotator)
    assert api_call(client, "repositories_list", status=200, **auth)["results"] == []
    for operation in ("repositories_retrieve", "repositories_commits_list"):
        assert api_call(client, operation, small_repository.pk, status=404, **auth)["error"] == "not_found"
    job = MiningJob.objects.get(repository=small_repository).job
    assert api_call(client, "jobs_retrieve", job.pk, status=404, **auth)["error"] == "not_found"
    assert api_call(client, "jobs_list", status=200, **auth)["results"] == []
    curator.groups.add(Group.objects.get(name="secret-team"))
    assert api_call(client, "jobs_retrieve", job.pk, status=200, **bearer(curator))["id"] == job.pk


# --- repositories ---------------------------------------------------------------------------------


def test_registering_checks_as_the_form_does_and_starts_the_first_mining(curator, curator_token, git_repo,
                                                                          small_repository):
    client = Client()
    again = api_call(client, "repositories_create", status=400, data={"location": str(git_repo.path)},
                     **curator_token)
    assert again["error"] == "invalid"
    assert again["fields"] == {"location": ["This repository is already registered."]}
    other = git_repo.path.parent / "other"
    GitRepo(other).commit("Initial", {"a.py": "x = 1\n"})
    bad_name = api_call(client, "repositories_create", status=400,
                        data={"location": str(other), "name": "no spaces allowed"}, **curator_token)
    assert bad_name["error"] == "invalid" and list(bad_name["fields"]) == ["name"]
    assert bad_name["fields"]["name"][0].startswith("A name is owner/name")
    assert Repository.objects.count() == 1
    made = api_call(client, "repositories_create", status=201, data={"location": str(other), "name": "team/other"},
                    **curator_token)
    assert made["repository"]["name"] == "team/other" and made["mining"]["created"] is True
    job = Job.objects.get(pk=made["mining"]["job"]["id"])
    assert job.kind == "mining" and job.requested_by == curator and job.subject_id == made["repository"]["id"]
    assert made["mining"]["job"]["url"].endswith(f"/api/v1/jobs/{job.pk}/")


def test_mining_twice_gives_the_job_under_way_not_a_second(curator_token, small_repository):
    client = Client()
    first = api_call(client, "repositories_mine_create", small_repository.pk, status=202, **curator_token)
    second = api_call(client, "repositories_mine_create", small_repository.pk, status=202, **curator_token)
    assert first["created"] is True and second["created"] is False
    assert first["job"]["id"] == second["job"]["id"]
    assert MiningJob.objects.filter(repository=small_repository, job__state="queued").count() == 1


def test_filters_change_starts_their_job_and_waits_for_a_running_one(curator_token, small_repository):
    client = Client()
    filters = {"max_files": 3, "max_lines": 80, "max_patch_chars": 9000, "test_file_globs": ["test_*.py"],
               "test_dir_names": ["tests"]}
    started = api_call(client, "repositories_filters_update", small_repository.pk, status=202, data=filters,
                       **curator_token)
    small_repository.refresh_from_db()
    assert small_repository.max_lines == 80 and started["created"] is True
    busy = api_call(client, "repositories_filters_update", small_repository.pk, status=409,
                    data={**filters, "max_lines": 90}, **curator_token)
    assert busy["error"] == "repository_busy" and "when it ends" in busy["detail"]
    small_repository.refresh_from_db()
    assert small_repository.max_lines == 80  # nothing half-written


def test_a_repository_is_deleted_with_its_commits(curator_token, small_repository):
    api_call(Client(), "repositories_destroy", small_repository.pk, status=204, **curator_token)
    assert not Repository.objects.exists() and not Commit.objects.exists()


# --- commits: filters, cursor, keep ---------------------------------------------------------------


def test_commits_filter_by_kept_dropped_and_reason(curator_token, small_repository):
    client = Client()

    def shas(**query):
        return [c["sha"] for c in api_call(client, "repositories_commits_list", small_repository.pk, status=200,
                                           query=query, **curator_token)["results"]]

    stored = Commit.objects.filter(repository=small_repository)
    assert sorted(shas()) == sorted(stored.values_list("sha", flat=True))
    assert sorted(shas(status="kept")) == sorted(stored.filter(drop_reason="").values_list("sha", flat=True))
    dropped = stored.exclude(drop_reason="")
    assert sorted(shas(status="dropped")) == sorted(dropped.values_list("sha", flat=True))
    reason = dropped.first().drop_reason
    assert sorted(shas(status=reason)) == sorted(dropped.filter(drop_reason=reason).values_list("sha", flat=True))
    wrong = api_call(client, "repositories_commits_list", small_repository.pk, status=400,
                     query={"status": "lost", "since": "yesterday"}, **curator_token)
    assert wrong["error"] == "invalid" and set(wrong["fields"]) == {"status", "since"}


def test_a_cursor_page_stays_put_while_commits_are_added(curator_token, small_repository):
    client = Client()
    commits_and_tasks_make(small_repository, 7)
    before = list(Commit.objects.filter(repository=small_repository).order_by("-id").values_list("sha", flat=True))
    first = api_call(client, "repositories_commits_list", small_repository.pk, status=200, query={"page_size": 4},
                     **curator_token)
    commits_and_tasks_make(small_repository, 5, start=100)  # newer rows, at the head
    seen = [c["sha"] for c in first["results"]]
    following = first["next"]
    while following:
        page = client.get(following, **curator_token).json()
        seen += [c["sha"] for c in page["results"]]
        following = page["next"]
    assert seen == before  # no row twice, none skipped


def test_a_cursor_from_another_sort_or_made_up_is_refused_in_words(curator_token, small_repository):
    import base64

    made_up = base64.b64encode(b"p=not-a-number").decode()
    refused = api_call(Client(), "jobs_list", status=400, query={"cursor": made_up}, **curator_token)
    assert refused == {"error": "invalid_cursor", "fields": {"cursor": [refused["detail"]]},
                       "detail": "This cursor is not one this list gave in this order: start again without it."}


def test_a_list_costs_the_same_queries_at_ten_rows_and_at_a_hundred(curator_token, small_repository):
    client = Client()

    def queries(page_size):
        with CaptureQueriesContext(connection) as captured:
            body = api_call(client, "repositories_commits_list", small_repository.pk, status=200,
                            query={"page_size": page_size}, **curator_token)
        assert len(body["results"]) == page_size
        return len(captured)

    commits_and_tasks_make(small_repository, 120)
    queries(1)  # the token's first use of the minute writes when it was used
    # The token with its user, the user's roles, the repository, the page of commits with who kept each.
    assert queries(10) == queries(100) == 4

    for n in range(30):
        mining_job_make(small_repository, state="succeeded")
    with CaptureQueriesContext(connection) as ten:
        api_call(client, "jobs_list", status=200, query={"page_size": 10}, **curator_token)
    with CaptureQueriesContext(connection) as thirty:
        api_call(client, "jobs_list", status=200, query={"page_size": 30}, **curator_token)
    assert len(ten) == len(thirty)

    # Tasks, candidates (with their judge score and execution result) and labels: the same.
    dataset = Dataset.objects.get(repository=small_repository)
    tasks = list(Task.objects.filter(repository=small_repository).order_by("id")[:110])
    candidates = Candidate.objects.bulk_create([Candidate(task=task, source="import", kind="agent", patch="+x\n")
                                                for task in tasks])
    annotator = user_with_role("ann", "annotator")
    Label.objects.bulk_create([Label(candidate=candidate, annotator=annotator, dataset=dataset, verdict="correct",
                                     confidence=2, seconds=10, order="random") for candidate in candidates])
    for operation, args in (("tasks_list", []), ("datasets_candidates_list", [dataset.pk]),
                            ("datasets_labels_given_list", [dataset.pk])):
        counts = []
        for size in (10, 100):
            with CaptureQueriesContext(connection) as captured:
                body = api_call(client, operation, *args, status=200, query={"page_size": size}, **curator_token)
            assert len(body["results"]) == size, operation
            counts.append(len(captured))
        assert counts[0] == counts[1], (operation, counts)


def test_a_dropped_commit_is_kept_by_hand_with_a_note(curator, curator_token, small_repository):
    client = Client()
    dropped = Commit.objects.filter(repository=small_repository).exclude(drop_reason__in=["", "merge_commit"]).first()
    shown = api_call(client, "repositories_commits_retrieve", small_repository.pk, dropped.sha, status=200,
                     **curator_token)
    assert shown["kept"] is False and shown["drop_reason"] == dropped.drop_reason
    no_note = api_call(client, "repositories_commits_keep_create", small_repository.pk, dropped.sha, status=400,
                       data={}, **curator_token)
    assert no_note["fields"] == {"note": ["This field is required."]}
    kept = api_call(client, "repositories_commits_keep_create", small_repository.pk, dropped.sha, status=200,
                    data={"note": "a real fix in the docs' code"}, **curator_token)
    assert kept["kept"] is True and kept["kept_by"] == curator.username
    twice = api_call(client, "repositories_commits_keep_create", small_repository.pk, dropped.sha, status=409,
                     data={"note": "again"}, **curator_token)
    assert twice == {"error": "not_kept", "detail": "Not kept: it is kept already.", "fields": {}}


# --- jobs -----------------------------------------------------------------------------------------


def test_a_job_is_cancelled_then_retried_and_a_second_cancel_is_refused(curator_token, small_repository):
    client = Client()
    started = api_call(client, "repositories_mine_create", small_repository.pk, status=202, **curator_token)
    job_id = started["job"]["id"]
    listed = api_call(client, "jobs_list", status=200, query={"kind": "mining", "state": "queued"}, **curator_token)
    assert [j["id"] for j in listed["results"]] == [job_id]
    cancelled = api_call(client, "jobs_cancel_create", job_id, status=200, **curator_token)
    assert cancelled["state"] == "cancelled"
    again = api_call(client, "jobs_cancel_create", job_id, status=409, **curator_token)
    assert again["error"] == "not_cancellable" and "ended already" in again["detail"]
    retried = api_call(client, "jobs_retry_create", job_id, status=202, **curator_token)
    assert retried["created"] is True and retried["job"]["id"] != job_id
    assert api_call(client, "jobs_retrieve", retried["job"]["id"], status=200, **curator_token)["state"] == "queued"


# --- bad input ------------------------------------------------------------------------------------


def test_malformed_json_wrong_types_and_unknown_fields_are_refused_in_words(curator_token, small_repository):
    client = Client()
    broken = api_call(client, "repositories_create", status=400, data='{"location": ', **curator_token)
    assert broken["error"] == "parse_error" and "JSON" in broken["detail"]
    typed = api_call(client, "repositories_filters_update", small_repository.pk, status=400,
                     data={"max_files": "many", "max_lines": -1, "max_patch_chars": 1, "test_file_globs": "x",
                           "test_dir_names": []}, **curator_token)
    assert set(typed["fields"]) == {"max_files", "max_lines", "test_file_globs"}
    unknown = api_call(client, "repositories_create", status=400, data={"location": "/x", "locaton": "/y"},
                       **curator_token)
    assert unknown["fields"] == {"locaton": ["Unknown field."]}
    assert Repository.objects.count() == 1 and MiningJob.objects.count() == 1


def test_writes_past_the_rate_are_throttled_per_person_in_the_shared_cache_and_reads_are_not(
        curator, small_repository, settings):
    import redis
    from rest_framework.settings import api_settings
    from rest_framework.throttling import SimpleRateThrottle

    rates = {**api_settings.DEFAULT_THROTTLE_RATES, "write": "2/min"}
    SimpleRateThrottle.THROTTLE_RATES = rates
    try:
        client, script, notebook = Client(), bearer(curator, "script"), bearer(curator, "notebook")
        for _ in range(2):
            api_call(client, "repositories_mine_create", small_repository.pk, status=202, **script)
        slowed = api_call(client, "repositories_mine_create", small_repository.pk, status=429, **script)
        assert slowed["error"] == "throttled"
        api_call(client, "repositories_retrieve", small_repository.pk, status=200, **script)
        # Another token of the same person shares the count: more tokens are not more writes.
        api_call(client, "repositories_mine_create", small_repository.pk, status=429, **notebook)
    finally:
        SimpleRateThrottle.THROTTLE_RATES = api_settings.DEFAULT_THROTTLE_RATES
    # Counted in Redis, where every server process reads the same counts, not in this process's memory.
    assert redis.Redis.from_url(settings.CELERY_BROKER_URL).keys(
        f"commitgym-throttle:*throttle_write_{connection.settings_dict['NAME']}_{curator.pk}")


def test_writes_go_through_when_the_throttles_cache_is_out_of_reach(curator_token, small_repository, monkeypatch):
    from apps.api import WriteThrottle

    def unreachable(*args, **kwargs):
        raise ConnectionError("Redis is down")

    monkeypatch.setattr(WriteThrottle.cache, "get", unreachable)
    api_call(Client(), "repositories_mine_create", small_repository.pk, status=202, **curator_token)


def test_a_server_error_under_the_api_is_answered_in_its_shape(curator, monkeypatch):
    from apps.datasets import selectors

    def broken(**kwargs):
        raise RuntimeError("a bug")

    monkeypatch.setattr(selectors, "releases_listed", broken)
    client = Client(raise_request_exception=False)
    failed = client.get(reverse("api:releases"), **bearer(curator))
    assert failed.status_code == 500 and failed.json() == {
        "error": "server_error", "detail": "The server failed on this request; the error is logged for its "
                                           "administrators.", "fields": {}}
    client.force_login(curator)
    page = client.get(reverse("datasets:releases"))  # a page fails as Django's page
    assert page.status_code == 500 and page["Content-Type"].startswith("text/html")


# --- the schema -----------------------------------------------------------------------------------


def test_the_schema_and_its_docs_are_for_people_signed_in(curator_token):
    assert Client().get("/api/schema/").status_code == 401
    assert Client().get("/api/docs/").status_code == 401
    served = Client().get("/api/schema/", **curator_token)
    assert served.status_code == 200 and b"operationId: repositories_list" in served.content


def test_the_schema_validates_with_no_warning(tmp_path):
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(tmp_path / "schema.yaml"))
    assert "operationId: repositories_list" in (tmp_path / "schema.yaml").read_text()


def _operations_named_by_tests() -> set[str]:
    named = set()
    for path in Path(__file__).parent.glob("test_*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "api_call" and len(node.args) > 1 \
                    and isinstance(node.args[1], ast.Constant):
                named.add(node.args[1].value)
    return named


def test_every_operation_in_the_schema_is_called_by_a_test_that_checks_its_answer(db):
    missing = sorted(set(api_operations()) - _operations_named_by_tests())
    assert not missing, f"operations no test calls through api_call: {missing}"


# --- environments ---------------------------------------------------------------------------------


def test_environments_read_with_their_lock_only_where_the_repository_is_visible(curator, annotator, small_repository):
    from apps.environments.models import Environment

    built = Environment.objects.create(key="k" * 64, python_version="3.11", lock="click==8.1.7\n", path="/nowhere",
                                       repository=small_repository)
    client = Client()
    listed = api_call(client, "environments_list", status=200, **bearer(curator))
    assert [e["key"] for e in listed["results"]] == [built.key] and "lock" not in listed["results"][0]
    shown = api_call(client, "environments_retrieve", built.key, status=200, **bearer(curator))
    assert shown["lock"] == "click==8.1.7\n" and shown["repository"] == small_repository.name
    small_repository.allowed_groups.set([Group.objects.create(name="secret-team")])
    assert api_call(client, "environments_retrieve", built.key, status=404, **bearer(annotator))["error"] == "not_found"
    # Seen through a validation of a repository the annotator sees, it does not name the one that built it.
    from tests.conftest import validation_make

    other = Repository.objects.create(name="open/other", url="/nowhere/open/other")
    validation_make(commits_and_tasks_make(other, 1)[0], environment=built)
    shown = api_call(client, "environments_retrieve", built.key, status=200, **bearer(annotator))
    assert shown["repository"] is None and small_repository.name not in json.dumps(shown)
