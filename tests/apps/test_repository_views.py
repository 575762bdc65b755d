import re
import shutil
from datetime import datetime, timezone
from html import unescape

import pytest
from django.contrib.auth.models import Group, User
from django.db import connection
from django.test import Client, RequestFactory
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from apps.jobs.services import job_run
from apps.repositories import views
from apps.repositories.models import Commit, MiningJob, Repository
from apps.repositories.services import mining_job_start, repository_register
from apps.repositories.templatetags.commitgym import redact
from apps.tasks.models import Task
from tests.conftest import mine_now, mining_job_make, ssh_private_key, user_with_role
from worker.engine.git.repo import GitCredentials
from worker.engine.reasons import reason_sentence
from worker.engine.test_files import TestFileRules

TOKEN = "s3cr3t-token"
TOKEN_URL = f"https://user:{TOKEN}@127.0.0.1:9/x.git"
SSH_KEY = ssh_private_key()
KEY_BODY = SSH_KEY.splitlines()[1]  # a line of the key's own text
QUERY_TOKEN_URL = f"https://127.0.0.1:9/x.git?access_token={TOKEN}"
HTMX = {"HX-Request": "true"}


def commit_by_subject(repository, subject) -> Commit:
    return Commit.objects.get(repository=repository, message__startswith=subject)


def html(response) -> str:
    return response.content.decode()


def field_errors(page: str, field: str) -> str:
    """The text of the errors shown beside one field of the register form."""
    match = re.search(rf'<div class="field has-errors">\s*<label for="id_{field}">.*?</div>', page, re.S)
    return unescape(text_of(match.group(0))) if match else ""


def text_of(page: str) -> str:
    """The page's text without tags, whitespace collapsed."""
    return " ".join(re.sub(r"<[^>]+>", " ", page).split())


@pytest.fixture
def outsider_client(db) -> Client:
    """A curator in no special group."""
    client = Client()
    client.force_login(user_with_role("olga", "curator"))
    return client


@pytest.fixture
def staff_client(db) -> Client:
    """A superuser for the Django admin (conftest's `admin_user` is an admin by role, not staff)."""
    client = Client()
    client.force_login(User.objects.create_superuser("root", password="pw"))
    return client


@pytest.fixture(params=[TOKEN_URL, QUERY_TOKEN_URL], ids=["in the user-info", "in the query string"])
def token_location(request):
    return request.param


@pytest.fixture
def token_repository(db, curator, token_location):
    """A repository registered with a token in its URL, whose mining job has failed (nothing listens on port 9)."""
    repository = repository_register(location=token_location, user=curator)
    job = mine_now(repository)
    assert job.state == MiningJob.State.FAILED
    return repository


def page_urls(repository) -> list[str]:
    commit = repository.commits.first()
    job = repository.mining_jobs.first()
    return [
        reverse("repositories:list"),
        reverse("repositories:detail", args=[repository.pk]),
        reverse("repositories:delete", args=[repository.pk]),
        reverse("repositories:commits", args=[repository.pk]),
        reverse("repositories:commit", args=[repository.pk, commit.sha]),
        reverse("repositories:job", args=[repository.pk, job.pk]),
    ]


# --- login and permissions -------------------------------------------------------------


@pytest.mark.django_db
def test_every_page_needs_a_login(small_repository):
    client = Client()
    for url in page_urls(small_repository):
        response = client.get(url)
        assert response.status_code == 302, url
        assert response["Location"].startswith(reverse("login")), url
    assert client.get(reverse("login")).status_code == 200


@pytest.mark.django_db
def test_login_page_logs_in(curator):
    client = Client()
    response = client.post(reverse("login"), {"username": "carla", "password": "pw-carla"})
    assert response.status_code == 302
    page = client.get(reverse("repositories:list"))
    assert page.status_code == 200
    assert "carla" in html(page) and "curator" in html(page)


@pytest.mark.django_db
def test_annotator_cannot_write_and_sees_no_buttons(annotator_client, small_repository):
    pk = small_repository.pk
    job = small_repository.mining_jobs.first()
    writes = [
        (reverse("repositories:list"), {"location": "/tmp/anything"}),
        (reverse("repositories:mine", args=[pk]), {}),
        (reverse("repositories:filters", args=[pk]), {"max_files": 0, "max_lines": 1, "max_patch_chars": 1}),
        (reverse("repositories:delete", args=[pk]), {}),
        (reverse("repositories:job_cancel", args=[pk, job.pk]), {}),
        (reverse("repositories:job_retry", args=[pk, job.pk]), {}),
    ]
    for url, data in writes:
        assert annotator_client.post(url, data).status_code == 403, url
    assert annotator_client.get(reverse("repositories:delete", args=[pk])).status_code == 403
    assert Repository.objects.count() == 1 and MiningJob.objects.count() == 1
    assert Repository.objects.get().max_files == 5

    listing = html(annotator_client.get(reverse("repositories:list")))
    detail = html(annotator_client.get(reverse("repositories:detail", args=[pk])))
    assert small_repository.name in listing
    assert "Register a repository" not in listing
    for text in ("Mine again", "Save filters", reverse("repositories:delete", args=[pk]), "Retry", "Cancel"):
        assert text not in detail


@pytest.mark.django_db
def test_restricted_repository_is_404_for_outsiders_and_visible_to_members(
    small_repository, outsider_client, annotator, annotator_client, admin_user
):
    reviewers = Group.objects.create(name="reviewers")
    small_repository.allowed_groups.set([reviewers])
    for url in page_urls(small_repository)[1:]:
        assert outsider_client.get(url, headers=HTMX).status_code == 404, url
    assert outsider_client.post(reverse("repositories:mine", args=[small_repository.pk])).status_code == 404
    assert small_repository.name not in html(outsider_client.get(reverse("repositories:list")))

    annotator.groups.add(reviewers)
    for url in page_urls(small_repository):
        if "delete" not in url:
            assert annotator_client.get(url, headers=HTMX).status_code == 200, url
    assert small_repository.name in html(annotator_client.get(reverse("repositories:list")))

    admin_role_client = Client()
    admin_role_client.force_login(admin_user)
    assert admin_role_client.get(reverse("repositories:detail", args=[small_repository.pk])).status_code == 200


# --- registering and jobs -------------------------------------------------------------------


@pytest.mark.django_db
def test_register_creates_the_repository_and_a_queued_job(curator_client, git_repo):
    git_repo.commit("Initial", {"lib/a.py": "x = 1\n"})
    git_repo.commit("Fix", {"lib/a.py": "x = 2\n"})
    reviewers = Group.objects.create(name="reviewers")
    response = curator_client.post(reverse("repositories:list"), {
        "location": str(git_repo.path), "name": "acme/widgets", "allowed_groups": [reviewers.pk]})
    assert response.status_code == 400 and "you would not see the repository" in html(response)
    curators = Group.objects.get(name="curator")
    response = curator_client.post(reverse("repositories:list"), {
        "location": str(git_repo.path), "name": "acme/widgets", "allowed_groups": [reviewers.pk, curators.pk]})
    repository = Repository.objects.get()
    assert response.status_code == 302
    assert response["Location"] == reverse("repositories:detail", args=[repository.pk])
    assert repository.name == "acme/widgets"
    assert set(repository.allowed_groups.all()) == {reviewers, curators}
    job = repository.mining_jobs.get()
    assert job.state == MiningJob.State.QUEUED

    job_run(job_id=job.job_id)
    detail = html(curator_client.get(response["Location"]))
    assert "Succeeded" in detail and "2 of 2 commits" in detail
    assert "mining job" in detail.lower()


@pytest.mark.django_db
def test_register_rejects_an_empty_location_and_keeps_the_input(curator_client):
    response = curator_client.post(reverse("repositories:list"), {"location": "  ", "name": "kept/name"})
    assert response.status_code == 400
    assert "This field is required" in html(response) or "Enter a URL" in html(response)
    assert 'value="kept/name"' in html(response)
    assert not Repository.objects.exists()


@pytest.mark.django_db
def test_register_refuses_local_folders_outside_the_allowed_roots(curator_client, admin_user, git_repo, settings):
    git_repo.commit("Initial", {"lib/a.py": "x = 1\n"})
    settings.COMMITGYM_LOCAL_ROOTS = []
    response = curator_client.post(reverse("repositories:list"), {"location": str(git_repo.path), "name": "acme/w"})
    page = html(response)
    assert response.status_code == 400
    assert "Local folders can be registered only by an admin" in field_errors(page, "location")
    assert not field_errors(page, "name")
    assert f'value="{git_repo.path}"' in page and 'value="acme/w"' in page
    assert not Repository.objects.exists() and not MiningJob.objects.exists()

    admin_role_client = Client()
    admin_role_client.force_login(admin_user)
    response = admin_role_client.post(reverse("repositories:list"), {"location": str(git_repo.path)})
    assert response.status_code == 302
    assert Repository.objects.get().url == str(git_repo.path)


@pytest.mark.django_db
def test_register_refuses_the_mirror_folder_even_for_an_admin(admin_user, small_repository, settings):
    admin_role_client = Client()
    admin_role_client.force_login(admin_user)
    for location in (str(settings.COMMITGYM_MIRROR_DIR), str(small_repository.mirror_dir)):
        response = admin_role_client.post(reverse("repositories:list"), {"location": location})
        assert response.status_code == 400, location
        assert "commitgym's own mirrors" in field_errors(html(response), "location")
    assert Repository.objects.count() == 1


@pytest.mark.django_db
def test_register_refuses_a_name_that_is_not_owner_slash_name(curator_client, git_repo):
    git_repo.commit("Initial", {"lib/a.py": "x = 1\n"})
    for name in ("a__b/c", "no-slash", "a/b/c"):
        response = curator_client.post(reverse("repositories:list"), {"location": TOKEN_URL, "name": name})
        page = html(response)
        assert response.status_code == 400, name
        assert "A name is owner/name" in field_errors(page, "name"), name
        assert not field_errors(page, "location"), name
        # The input comes back, minus the token.
        assert f'value="{name}"' in page and 'value="https://127.0.0.1:9/x.git"' in page
        assert TOKEN not in page
    assert not Repository.objects.exists()
    response = curator_client.post(reverse("repositories:list"), {"location": str(git_repo.path), "name": "a_b/c"})
    assert response.status_code == 302 and Repository.objects.get().name == "a_b/c"


@pytest.mark.django_db
def test_register_views_hide_locations_and_keys_from_error_reports(curator, admin_user):
    factory = RequestFactory()
    request = factory.get(reverse("repositories:list"))
    request.user = curator
    assert views.repository_list(request).status_code == 200
    assert set(request.sensitive_post_parameters) == {"location", "ssh_key"}

    from django.contrib import admin

    request = factory.get(reverse("admin:repositories_repository_add"))
    request.user = User.objects.create_superuser("root", password="pw")
    assert admin.site._registry[Repository].add_view(request).status_code == 200
    assert {"location", "ssh_key"} <= set(request.sensitive_post_parameters)


@pytest.mark.django_db
def test_register_rejects_a_repository_already_registered(curator_client, small_repository):
    response = curator_client.post(reverse("repositories:list"), {"location": small_repository.url})
    assert response.status_code == 400
    assert "already registered" in html(response)


@pytest.mark.django_db
def test_a_token_is_never_shown(curator_client, token_repository, staff_client, token_location):
    pk = token_repository.pk
    job = token_repository.mining_jobs.get()
    assert job.error_code == "unreachable"
    pages = [
        curator_client.get(reverse("repositories:list")),
        curator_client.get(reverse("repositories:detail", args=[pk])),
        curator_client.get(reverse("repositories:job", args=[pk, job.pk]), headers=HTMX),
        curator_client.get(reverse("repositories:delete", args=[pk])),
        staff_client.get(reverse("admin:repositories_repository_change", args=[pk])),
        staff_client.get(reverse("admin:repositories_repository_changelist")),
        staff_client.get(reverse("admin:repositories_miningjob_change", args=[job.pk])),
    ]
    for response in pages:
        assert response.status_code == 200, response.request["PATH_INFO"]
        assert TOKEN not in html(response), response.request["PATH_INFO"]
    for response in pages[:3]:
        assert "The repository could not be reached" in html(response)
    assert "stored (hidden)" in html(pages[1])

    # A form error does not echo the token back either.
    again = curator_client.post(reverse("repositories:list"), {"location": token_location})
    assert again.status_code == 400 and TOKEN not in html(again)


@pytest.mark.django_db
def test_job_partial_polls_only_while_the_job_is_active(curator_client, small_repository):
    finished = small_repository.mining_jobs.get()
    url = reverse("repositories:job", args=[small_repository.pk, finished.pk])
    partial = html(curator_client.get(url, headers=HTMX))
    assert "hx-trigger" not in partial and "<html" not in partial
    assert "Succeeded" in partial
    # The last answer reloads the page: its funnel, counts and job times changed too.
    assert curator_client.get(url, headers=HTMX)["HX-Refresh"] == "true"

    active = mining_job_make(small_repository, state=MiningJob.State.RUNNING, progress_done=3, progress_total=7)
    partial = html(curator_client.get(reverse("repositories:job", args=[small_repository.pk, active.pk]),
                                      headers=HTMX))
    assert 'hx-trigger="every 2s"' in partial and "3 of 7 commits" in partial
    assert "HX-Trigger" not in curator_client.get(
        reverse("repositories:job", args=[small_repository.pk, active.pk]), headers=HTMX)
    assert "Cancel" in partial
    listing = html(curator_client.get(reverse("repositories:list")))
    assert listing.count('hx-trigger="every 2s"') == 1

    # Without htmx the job's URL leads to the repository page.
    assert curator_client.get(url).status_code == 302


@pytest.mark.django_db
def test_cancel_and_retry(curator_client, small_repository):
    pk = small_repository.pk
    queued = mining_job_make(small_repository)
    response = curator_client.post(reverse("repositories:job_cancel", args=[pk, queued.pk]))
    assert response.status_code == 302
    queued.refresh_from_db()
    assert queued.state == MiningJob.State.CANCELLED

    detail = html(curator_client.get(reverse("repositories:detail", args=[pk])))
    assert "Retry" in detail
    curator_client.post(reverse("repositories:job_retry", args=[pk, queued.pk]),
                        {"next": reverse("repositories:list")})
    retried = small_repository.mining_jobs.first()
    assert retried.pk != queued.pk and retried.state == MiningJob.State.QUEUED

    # "Mine again" while a job is queued returns that job.
    curator_client.post(reverse("repositories:mine", args=[pk]))
    assert small_repository.mining_jobs.filter(job__state=MiningJob.State.QUEUED).count() == 1


@pytest.mark.django_db
def test_failed_job_can_be_retried_from_the_page(curator_client, token_repository):
    failed = token_repository.mining_jobs.get()
    response = curator_client.post(reverse("repositories:job_retry", args=[token_repository.pk, failed.pk]))
    assert response.status_code == 302
    assert token_repository.mining_jobs.filter(job__state=MiningJob.State.QUEUED).count() == 1


# --- the repository page -----------------------------------------------------------------------


@pytest.mark.django_db
def test_repository_page_shows_the_funnel(curator_client, small_repository):
    page = html(curator_client.get(reverse("repositories:detail", args=[small_repository.pk])))
    funnel = page[page.index('class="funnel"'):page.index("</table>", page.index('class="funnel"'))]
    rows = re.findall(r'<th scope="row">(.*?)</th>.*?<td class="num">(\d+)</td>', funnel, re.S)
    assert rows == [
        ("Commits in the history", "4"), ("Not a merge", "4"), ("No file over 5 MiB", "4"), ("Text files only", "3"),
        ("≤ 5 non-test files", "3"),
        ("≤ 100 edited lines", "3"), ("≤ 2,000 patch characters", "3"), ("Python change beyond comments", "2"),
    ]
    commits_url = reverse("repositories:commits", args=[small_repository.pk])
    assert f"{commits_url}?status=binary_file" in funnel
    assert f"{commits_url}?status=no_python_change" in funnel
    assert "The commit changes a binary file." in page
    assert "everyone who can log in" in page and "credentials" in page.lower()


@pytest.mark.django_db
def test_filters_form_reapplies_to_stored_commits(curator_client, small_repository):
    assert Task.objects.filter(repository=small_repository).count() == 2
    response = curator_client.post(reverse("repositories:filters", args=[small_repository.pk]), {
        "max_files": 0, "max_lines": 100, "max_patch_chars": 2000,
        "test_file_globs": "test_*.py, *_test.py, conftest.py", "test_dir_names": "test, tests",
    }, follow=True)
    job = small_repository.mining_jobs.get(refilter_only=True)
    assert f"job {job.pk} re-applies them" in html(response)
    # The job records what it applies, and the jobs page tells it from a mining run.
    assert (job.filters["max_files"], job.filters["max_patch_chars"]) == (0, 2000)
    jobs_page = html(curator_client.get(reverse("jobs:list")))
    assert f"{small_repository.name}: re-filter (≤ 0 files, ≤ 100 lines, ≤ 2,000 patch characters)" in jobs_page
    job_run(job_id=job.job_id)
    assert not Commit.objects.filter(repository=small_repository, drop_reason="").exists()
    assert not Task.objects.filter(repository=small_repository).exists()

    curator_client.post(reverse("repositories:filters", args=[small_repository.pk]), {
        "max_files": 5, "max_lines": 100, "max_patch_chars": 2000,
        "test_file_globs": "test_*.py, *_test.py, conftest.py", "test_dir_names": "test, tests",
    })
    job_run(job_id=small_repository.mining_jobs.filter(job__state=MiningJob.State.QUEUED).get().job_id)
    assert Task.objects.filter(repository=small_repository).count() == 2


@pytest.mark.django_db
def test_filters_form_refuses_while_a_job_runs(curator_client, small_repository):
    mining_job_start(repository=small_repository)
    response = curator_client.post(reverse("repositories:filters", args=[small_repository.pk]), {
        "max_files": 0, "max_lines": 100, "max_patch_chars": 2000,
        "test_file_globs": "test_*.py", "test_dir_names": "tests",
    })
    assert response.status_code == 409
    assert "change the filters when it ends" in html(response)
    small_repository.refresh_from_db()
    assert small_repository.max_files == 5


@pytest.mark.django_db
def test_changing_test_file_rules_starts_a_full_mining_job(curator_client, small_repository):
    response = curator_client.post(reverse("repositories:filters", args=[small_repository.pk]), {
        "max_files": 5, "max_lines": 100, "max_patch_chars": 2000,
        "test_file_globs": "test_*.py", "test_dir_names": "",
    }, follow=True)
    small_repository.refresh_from_db()
    assert small_repository.test_file_globs == ["test_*.py"] and small_repository.test_dir_names == []
    assert small_repository.mining_jobs.filter(job__state=MiningJob.State.QUEUED).exists()
    assert "measures every commit again" in html(response)


@pytest.mark.django_db
def test_filters_form_rejects_bad_numbers(curator_client, small_repository):
    response = curator_client.post(reverse("repositories:filters", args=[small_repository.pk]), {
        "max_files": -1, "max_lines": "many", "max_patch_chars": 2000})
    assert response.status_code == 400
    assert "errorlist" in html(response)
    small_repository.refresh_from_db()
    assert small_repository.max_files == 5


# --- deleting ------------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_deleting_a_repository_never_fetched_says_it_had_no_mirror(curator_client):
    repository = Repository.objects.create(name="acme/never", url="http://127.0.0.1:9/never.git")
    response = curator_client.post(reverse("repositories:delete", args=[repository.pk]), follow=True)
    assert "Deleted acme/never: 0 commits, 0 tasks, 0 mining jobs; it had no mirror." in html(response)


@pytest.mark.django_db
def test_delete_confirms_with_counts_then_removes_rows_and_mirror(curator_client, small_repository):
    pk, mirror = small_repository.pk, small_repository.mirror_dir
    assert mirror.is_dir()
    page = html(curator_client.get(reverse("repositories:delete", args=[pk])))
    text = text_of(page)
    assert "4 commits" in text and "2 tasks" in text and "1 mining job" in text
    assert "the mirror on disk" in text

    response = curator_client.post(reverse("repositories:delete", args=[pk]), follow=True)
    assert response.redirect_chain[-1][0] == reverse("repositories:list")
    assert f"Deleted {small_repository.name}: 4 commits, 2 tasks, 1 mining job and its mirror." in html(response)
    assert not Repository.objects.filter(pk=pk).exists()
    assert not Commit.objects.exists() and not Task.objects.exists() and not MiningJob.objects.exists()
    assert not mirror.exists()


# --- commits ------------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_commit_list_filters_by_status_date_and_text(curator_client, small_repository):
    url = reverse("repositories:commits", args=[small_repository.pk])

    def subjects(**params):
        page = html(curator_client.get(url, params))
        return set(re.findall(r'<td class="subject">(.*?)</td>', page))

    everything = {"Initial library", "Fix add returning the difference", "Document add", "Add logo"}
    assert subjects() == everything
    assert subjects(status="kept") == {"Initial library", "Fix add returning the difference"}
    assert subjects(status="dropped") == {"Document add", "Add logo"}
    assert subjects(status="binary_file") == {"Add logo"}
    assert subjects(q="DOCUMENT") == {"Document add"}
    assert subjects(status="not-a-status") == everything

    fix = commit_by_subject(small_repository, "Fix add")
    Commit.objects.filter(pk=fix.pk).update(committed_at=datetime(2025, 6, 1, 12, tzinfo=timezone.utc))
    assert subjects(since="2025-05-01", until="2025-06-30") == {"Fix add returning the difference"}
    assert subjects(since="2025-12-01") == everything - {"Fix add returning the difference"}
    assert subjects(since="not a date") == everything

    page = html(curator_client.get(url, {"status": "no_python_change"}))
    assert 'title="No non-test Python file changes beyond comments and docstrings."' in page
    assert fix.task.instance_id in html(curator_client.get(url))
    select = page[page.index('name="status"'):page.index("</select>", page.index('name="status"'))]
    assert "All (4)" in select and "Kept (2)" in select and "binary_file (1)" in select

    partial = html(curator_client.get(url, {"status": "kept"}, headers=HTMX))
    assert "<html" not in partial and 'id="commit-results"' in partial and "Initial library" in partial


@pytest.fixture
def long_repository(db, git_repo, curator):
    """A mined repository with 61 commits, every one a small kept fix."""
    for n in range(61):
        git_repo.commit(f"Change {n:02d}", {"lib/a.py": f"x = {n}\n"})
    repository = repository_register(location=str(git_repo.path), user=curator)
    assert mine_now(repository).state == MiningJob.State.SUCCEEDED
    return repository


@pytest.mark.django_db
def test_commit_list_paginates_with_bounded_queries(curator_client, long_repository, django_assert_max_num_queries):
    url = reverse("repositories:commits", args=[long_repository.pk])
    with django_assert_max_num_queries(10):
        first = html(curator_client.get(url, {"status": "kept"}))
    assert first.count('<td class="subject">') == 50
    assert "Page 1 of 2" in first and "Change 60" in first
    assert "?status=kept&amp;page=2" in first

    with django_assert_max_num_queries(10):
        second = html(curator_client.get(url, {"status": "kept", "page": 2}))
    assert second.count('<td class="subject">') == 11 and "Change 00" in second

    assert html(curator_client.get(url, {"page": 99})).count('<td class="subject">') == 11


@pytest.mark.django_db
def test_commit_page_splits_source_and_tests_and_highlights(curator_client, small_repository):
    fix = commit_by_subject(small_repository, "Fix add")
    page = html(curator_client.get(reverse("repositories:commit", args=[small_repository.pk, fix.sha])))
    source = page[page.index('class="diff-section diff-source"'):page.index('class="diff-section diff-tests"')]
    tests = page[page.index('class="diff-section diff-tests"'):]
    assert "lib/calc.py" in source and "tests/test_calc.py" not in source
    assert "tests/test_calc.py" in tests
    assert '<div class="highlight">' in page and '<span class="gi">' in page and '<span class="gd">' in page
    assert f"kept → task {fix.task.instance_id} (Mined)" in text_of(page)

    initial = commit_by_subject(small_repository, "Initial library")
    page = html(curator_client.get(reverse("repositories:commit", args=[small_repository.pk, initial.sha])))
    assert 'class="diff-section diff-other"' in page and "README.md" in page

    logo = commit_by_subject(small_repository, "Add logo")
    page = html(curator_client.get(reverse("repositories:commit", args=[small_repository.pk, logo.sha])))
    assert "The commit changes a binary file." in page


@pytest.mark.django_db
def test_commit_message_and_diff_with_html_render_inert(curator_client, git_repo, curator):
    git_repo.commit("Start", {"lib/page.py": "HTML = ''\n"})
    git_repo.commit("<script>alert(1)</script> fix\n\nBody <img src=x onerror=alert(2)>",
                    {"lib/page.py": "HTML = '<script>alert(3)</script>'\n"})
    repository = repository_register(location=str(git_repo.path), user=curator)
    mine_now(repository)
    commit = commit_by_subject(repository, "<script>")
    page = html(curator_client.get(reverse("repositories:commit", args=[repository.pk, commit.sha])))
    assert "<script>alert" not in page and "<img src=x" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "alert(3)" in page
    listing = html(curator_client.get(reverse("repositories:commits", args=[repository.pk])))
    assert "<script>alert" not in listing and "&lt;script&gt;alert(1)" in listing


@pytest.mark.django_db
def test_commit_page_without_a_mirror_says_so(curator_client, small_repository):
    shutil.rmtree(small_repository.mirror_dir)
    commit = small_repository.commits.first()
    response = curator_client.get(reverse("repositories:commit", args=[small_repository.pk, commit.sha]))
    assert response.status_code == 200
    assert "mirror is not on disk" in html(response)
    assert curator_client.get(reverse("repositories:commit", args=[small_repository.pk, "0" * 40])).status_code == 404


# --- query counts and admin ------------------------------------------------------------------------------


@pytest.mark.django_db
def test_repository_list_queries_do_not_grow_with_rows(curator_client, small_repository, curator):
    def queries():
        with CaptureQueriesContext(connection) as captured:
            assert curator_client.get(reverse("repositories:list")).status_code == 200
        return len(captured)

    reviewers = Group.objects.create(name="reviewers")
    small_repository.allowed_groups.set([reviewers, Group.objects.get(name="curator")])
    one = queries()
    for n in range(5):
        repository = Repository.objects.create(name=f"acme/r{n}", url=f"/srv/r{n}", created_by=curator)
        mining_job_make(repository, state=MiningJob.State.FAILED, error_code="unreachable")
        repository.allowed_groups.set([reviewers])
    curator.groups.add(reviewers)
    assert queries() == one <= 12


@pytest.mark.django_db
def test_admin_pages_work(staff_client, small_repository):
    for name in ("repository", "miningjob", "commit"):
        assert staff_client.get(reverse(f"admin:repositories_{name}_changelist")).status_code == 200
    for name in ("task", "taskstatechange"):
        assert staff_client.get(reverse(f"admin:tasks_{name}_changelist")).status_code == 200
    task = Task.objects.first()
    assert staff_client.get(reverse("admin:tasks_task_change", args=[task.pk])).status_code == 200
    assert staff_client.get(reverse("admin:repositories_repository_add")).status_code == 200


@pytest.mark.django_db
def test_admin_registers_a_repository_keeping_the_token_secret(staff_client):
    reviewers = Group.objects.create(name="reviewers")
    response = staff_client.post(reverse("admin:repositories_repository_add"), {
        "location": TOKEN_URL, "name": "", "ssh_key": SSH_KEY, "allowed_groups": [reviewers.pk]})
    assert response.status_code == 302, html(response)
    repository = Repository.objects.get()
    assert repository.url == "https://127.0.0.1:9/x.git" and repository.name == "remote/x"
    assert repository.created_by.username == "root"
    assert list(repository.allowed_groups.all()) == [reviewers]
    assert repository.has_credentials and TOKEN not in repository.credential_token
    assert repository.git_credentials().token == TOKEN and repository.git_credentials().username == "user"
    assert repository.git_credentials().ssh_key == SSH_KEY.strip()
    assert KEY_BODY not in repository.credential_ssh_key
    assert repository.mining_jobs.filter(job__state=MiningJob.State.QUEUED).exists()
    for url in (reverse("admin:repositories_repository_change", args=[repository.pk]), response["Location"]):
        page = html(staff_client.get(url, follow=True))
        assert TOKEN not in page and KEY_BODY not in page and repository.credential_token not in page

    # A second registration of the same URL, with a name, gets the next free name from the service.
    Repository.objects.filter(pk=repository.pk).update(url="https://elsewhere/x.git")
    response = staff_client.post(reverse("admin:repositories_repository_add"), {"location": TOKEN_URL})
    assert response.status_code == 302 and Repository.objects.filter(name="remote/x-2").exists()
    Repository.objects.exclude(pk=repository.pk).delete()

    staff_client.post(reverse("admin:repositories_repository_delete", args=[repository.pk]), {"post": "yes"})
    assert not Repository.objects.exists()


@pytest.mark.django_db
def test_admin_add_shows_refusals_as_field_errors(staff_client, settings):
    url = reverse("admin:repositories_repository_add")
    response = staff_client.post(url, {"location": TOKEN_URL, "name": "no-slash"})
    page = html(response)
    assert response.status_code == 200 and "A name is owner/name" in page
    assert TOKEN not in page and 'value="https://127.0.0.1:9/x.git"' in page
    response = staff_client.post(url, {"location": str(settings.COMMITGYM_MIRROR_DIR / "a")})
    assert response.status_code == 200 and "commitgym&#x27;s own mirrors" in html(response)
    assert not Repository.objects.exists() and not MiningJob.objects.exists()


def test_redact_filter_is_the_engine_redaction(monkeypatch):
    message = "fatal: could not read https://user:hunter2@example.com/x.git"
    redacted = "fatal: could not read https://***@example.com/x.git"
    assert redact(message) == GitCredentials().redact(message) == redacted
    assert redact(None) == "" and redact("") == ""
    monkeypatch.setattr(GitCredentials, "redact", lambda self, text: "engine said so")
    assert redact("anything") == "engine said so"


@pytest.mark.django_db
def test_commit_page_sorts_files_with_the_repositorys_test_file_rules(curator_client, small_repository, monkeypatch):
    kinds = []
    original = TestFileRules.kind
    monkeypatch.setattr(TestFileRules, "kind", lambda self, path: kinds.append(path) or original(self, path))
    fix = commit_by_subject(small_repository, "Fix add")
    url = reverse("repositories:commit", args=[small_repository.pk, fix.sha])
    html(curator_client.get(url))
    assert sorted(kinds) == ["lib/calc.py", "tests/test_calc.py"]

    # Without test-file rules the test file is a source file.
    Repository.objects.filter(pk=small_repository.pk).update(test_file_globs=[], test_dir_names=[])
    page = html(curator_client.get(url))
    assert 'class="diff-section diff-tests"' not in page
    source = page[page.index('class="diff-section diff-source"'):]
    assert "lib/calc.py" in source and "tests/test_calc.py" in source


@pytest.mark.django_db
@pytest.mark.parametrize("code", ["worker_lost", "credentials_unreadable"])
def test_job_cell_explains_lost_workers_and_unreadable_credentials(curator_client, small_repository, code):
    job = mining_job_make(small_repository, state=MiningJob.State.FAILED, error_code=code)
    sentence = reason_sentence(code)
    assert sentence != code.replace("_", " ")
    for response in (
        curator_client.get(reverse("repositories:list")),
        curator_client.get(reverse("repositories:detail", args=[small_repository.pk])),
        curator_client.get(reverse("repositories:job", args=[small_repository.pk, job.pk]), headers=HTMX),
    ):
        assert response.status_code == 200
        assert sentence.replace("'", "&#x27;") in html(response), response.request["PATH_INFO"]


@pytest.mark.django_db
def test_list_layout_wraps_paths_at_slashes_and_has_a_favicon(curator_client, small_repository, settings):
    page = html(curator_client.get(reverse("repositories:list")))
    assert '<link rel="icon" href="data:,">' in page
    assert '<td class="url" title="' in page
    css = (settings.BASE_DIR / "static" / "css" / "app.css").read_text()
    url_rule = re.search(r"^\.url \{[^}]*\}", css, re.M).group(0)
    assert "overflow-wrap: anywhere" in url_rule and "break-all" not in url_rule
    assert re.search(r'<span class="[^"]*\bnowrap\b[^"]*">\d+ new</span>', page)


@pytest.mark.django_db
def test_a_size_drop_says_its_measured_value_against_the_threshold(curator_client, small_repository):
    commit = Commit.objects.filter(repository=small_repository).first()
    Commit.objects.filter(id=commit.id).update(drop_reason="patch_too_long", patch_chars=3394)
    page = html(curator_client.get(reverse("repositories:commits", args=[small_repository.pk])))
    assert "(3,394 characters of non-test diff; the filter allows 2,000)" in page
    assert "Non-test files" in page and "Non-test patch chars" in page
    detail = html(curator_client.get(reverse("repositories:commit", args=[small_repository.pk, commit.sha])))
    assert "3,394 characters of non-test diff; the filter allows 2,000" in detail


@pytest.mark.django_db
def test_a_curator_keeps_a_dropped_commit_by_hand_and_a_refilter_keeps_it(curator_client, curator,
                                                                           small_repository):
    from apps.repositories.services import commits_refilter

    docs = Commit.objects.get(repository=small_repository, message="Document add")
    assert docs.drop_reason and not docs.tasks.exists()
    page = reverse("repositories:commit", args=[small_repository.pk, docs.sha])
    keep = reverse("repositories:commit_keep", args=[small_repository.pk, docs.sha])
    assert "Keep this commit" in html(curator_client.get(page))
    assert "Not kept: say why it is kept." in html(curator_client.post(keep, {"note": "  "}, follow=True))
    response = html(curator_client.post(keep, {"note": "the README states the contract"}, follow=True))
    docs.refresh_from_db()
    assert (docs.drop_reason, docs.kept_by, docs.kept_reason) == ("", curator, "no_python_change")
    assert docs.tasks.count() == 1 and "Kept by hand by carla" in response
    assert commits_refilter(repository=small_repository)["dropped"] == 0
    docs.refresh_from_db()
    assert docs.kept and docs.tasks.count() == 1
    # New test-file rules measure every commit again, in a mining run: still kept.
    from apps.repositories.services import repository_filters_update

    job = repository_filters_update(repository=small_repository, max_files=5, max_lines=100, max_patch_chars=2000,
                                    test_file_globs=["test_*.py", "check_*.py"], test_dir_names=["tests"])
    assert not job.refilter_only
    job_run(job_id=job.job_id)
    docs.refresh_from_db()
    assert docs.kept and docs.kept_at and docs.tasks.count() == 1
    # While a mining job runs, keeping waits.
    other = Commit.objects.filter(repository=small_repository).exclude(drop_reason="").first()
    mining_job_start(repository=small_repository)
    assert "a mining job is running" in html(curator_client.post(
        reverse("repositories:commit_keep", args=[small_repository.pk, other.sha]), {"note": "why"}, follow=True))


@pytest.mark.django_db
def test_the_repository_list_searches_names_and_locations(curator_client):
    Repository.objects.create(name="acme/widgets", url="https://git.example.com/acme/widgets.git")
    Repository.objects.create(name="other/tools", url="/srv/git/tools")
    page = html(curator_client.get(reverse("repositories:list") + "?q=WIDG"))
    assert "acme/widgets" in page and "other/tools" not in page
    assert "other/tools" in html(curator_client.get(reverse("repositories:list") + "?q=/srv/git"))
    none = html(curator_client.get(reverse("repositories:list") + "?q=nothing-like-it"))
    assert "No repository's name or location holds “nothing-like-it”." in none


def test_a_repository_that_never_mined_offers_its_deletion_and_stays_off_the_dashboard(curator_client,
                                                                                       small_repository):
    from apps.repositories.models import Repository
    from tests.conftest import mining_job_make

    unreachable = Repository.objects.create(name="team/unreachable", url="https://git.invalid/team/unreachable.git")
    mining_job_make(unreachable, state="failed", error_message="fatal: unable to access: Could not resolve host")
    page = curator_client.get(reverse("repositories:detail", args=[unreachable.pk])).content.decode()
    notice = page[page.index('id="never-mined"'):page.index("</section>", page.index('id="never-mined"'))]
    assert "its last mining job failed: fatal: unable to access: Could not resolve host" in notice
    assert f'href="{reverse("repositories:delete", args=[unreachable.pk])}"' in notice
    mined = curator_client.get(reverse("repositories:detail", args=[small_repository.pk])).content.decode()
    assert 'id="never-mined"' not in mined
    dashboard = curator_client.get(reverse("tasks:dashboard")).content.decode()
    assert small_repository.name in dashboard and "team/unreachable" not in dashboard
