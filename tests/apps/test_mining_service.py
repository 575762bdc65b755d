"""Mining services against PostgreSQL, with jobs run in this process as a worker would."""

import io
import logging
import os
import shutil
import threading

import pytest
from django.db import connection

from apps.jobs.models import Job
from apps.jobs.services import job_run
from apps.repositories.models import Commit, MiningJob, Repository
from apps.repositories.services import (
    RepositoryBusy,
    commits_refilter,
    mining_job_cancel,
    mining_job_start,
    repository_delete,
    repository_filters_update,
    repository_register,
)
from apps.tasks.models import Task
from tests.conftest import mine_now, mining_job_make


def _reasons(repository) -> dict[str, str]:
    return dict(Commit.objects.filter(repository=repository).values_list("message", "drop_reason"))


@pytest.mark.django_db
def test_small_repository_is_mined_with_reasons(small_repository):
    assert _reasons(small_repository) == {
        "Initial library": "",
        "Fix add returning the difference": "",
        "Document add": "no_python_change",
        "Add logo": "binary_file",
    }
    assert Task.objects.filter(repository=small_repository).count() == 2


@pytest.mark.django_db
def test_file_and_line_limits_at_their_boundaries(git_repo):
    git_repo.commit("init", {"README.md": "x\n"})
    git_repo.commit("five files", {f"pkg/m{i}.py": f"x = {i}\n" for i in range(5)})
    git_repo.commit("six files", {f"pkg/n{i}.py": f"x = {i}\n" for i in range(6)})
    git_repo.commit("100 lines", {"pkg/big.py": "".join(f"v{i} = {i}\n" for i in range(100))})
    git_repo.commit("101 lines", {"pkg/bigger.py": "".join(f"v{i} = {i}\n" for i in range(101))})
    git_repo.commit("50 changed lines", {"pkg/big.py": "".join(f"v{i} = {i + (i < 50)}\n" for i in range(100))})
    git_repo.commit("tests do not count", {"tests/test_big.py": "".join(f"t{i} = 1\n" for i in range(300)),
                                           "pkg/m0.py": "x = 10\n"})
    repository = repository_register(location=str(git_repo.path))
    mine_now(repository)
    reasons = _reasons(repository)
    assert reasons["five files"] == "" and reasons["six files"] == "too_many_files"
    assert reasons["100 lines"] == "" and reasons["101 lines"] == "too_many_lines"
    assert reasons["50 changed lines"] == ""  # 50 added + 50 deleted
    assert reasons["tests do not count"] == ""


@pytest.mark.django_db
def test_remining_only_adds_new_commits_and_never_duplicates(small_repository, git_repo):
    before = set(Commit.objects.filter(repository=small_repository).values_list("id", "sha"))
    again = mine_now(small_repository)
    assert again.new_commits == 0 and again.progress_total == 0
    new_sha = git_repo.commit("Fix add for strings", {"lib/calc.py": "def add(a, b):\n    return a + b  # ok\n\n"
                                                                     "def concat(a, b):\n    return a + b\n"})
    third = mine_now(small_repository)
    assert third.new_commits == 1 and third.progress_total == 1
    after = set(Commit.objects.filter(repository=small_repository).values_list("id", "sha"))
    assert before < after and {sha for _, sha in after - before} == {new_sha}
    assert Task.objects.filter(repository=small_repository).count() == 3


@pytest.mark.django_db
def test_running_the_same_job_twice_changes_nothing(small_repository):
    job, _ = mining_job_start(repository=small_repository)
    job_run(job_id=job.job_id)
    finished = MiningJob.objects.get(id=job.id)
    job_run(job_id=job.job_id)
    assert MiningJob.objects.get(id=job.id).finished_at == finished.finished_at


@pytest.mark.django_db
def test_one_active_job_per_repository(small_repository):
    first, created = mining_job_start(repository=small_repository)
    second, created_again = mining_job_start(repository=small_repository)
    assert created and not created_again and first.id == second.id


@pytest.mark.django_db(transaction=True)
def test_the_same_job_delivered_twice_at_once_runs_once(git_repo):
    git_repo.commit("init", {"pkg/a.py": "x = 0\n"})
    for i in range(1, 40):
        git_repo.commit(f"change {i}", {"pkg/a.py": f"x = {i}\n"})
    repository = repository_register(location=str(git_repo.path))
    # Created directly: mining_job_start would also publish the job to a worker.
    job = mining_job_make(repository)
    errors = []

    def run():
        try:
            job_run(job_id=job.job_id)
        except Exception as error:  # noqa: BLE001 - reported below
            errors.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=run) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert Commit.objects.filter(repository=repository).count() == 40
    assert Task.objects.filter(repository=repository).count() == 40
    assert MiningJob.objects.get(id=job.id).state == MiningJob.State.SUCCEEDED


def _repository_of_small_changes(git_repo, changes: int, monkeypatch):
    """A registered repository of one file changed `changes` times, mined 3 commits a batch."""
    import apps.repositories.services as services

    git_repo.commit("init", {"pkg/a.py": "x = 0\n"})
    for i in range(1, changes + 1):
        git_repo.commit(f"change {i}", {"pkg/a.py": f"x = {i}\n"})
    monkeypatch.setattr(services, "BATCH_SIZE", 3)
    return repository_register(location=str(git_repo.path))


@pytest.mark.django_db
def test_cancelled_job_keeps_what_it_stored_and_the_next_run_finishes(git_repo, monkeypatch):
    import apps.repositories.services as services

    repository = _repository_of_small_changes(git_repo, 9, monkeypatch)
    job, _ = mining_job_start(repository=repository)
    original_store = services.commits_store

    def store_then_cancel(**kwargs):
        new = original_store(**kwargs)
        mining_job_cancel(job=job)
        return new

    monkeypatch.setattr(services, "commits_store", store_then_cancel)
    job_run(job_id=job.job_id)
    job.refresh_from_db()
    assert job.state == MiningJob.State.CANCELLED and job.progress_done == 3
    assert Commit.objects.filter(repository=repository).count() == 3

    monkeypatch.setattr(services, "commits_store", original_store)
    retry = mine_now(repository)
    assert retry.state == MiningJob.State.SUCCEEDED and retry.new_commits == 7
    assert Commit.objects.filter(repository=repository).count() == 10


@pytest.mark.django_db
def test_a_job_taken_over_mid_walk_counts_what_both_workers_stored(git_repo, monkeypatch, settings):
    from datetime import timedelta

    from django.utils import timezone

    import apps.repositories.services as services

    repository = _repository_of_small_changes(git_repo, 9, monkeypatch)
    job, _ = mining_job_start(repository=repository)
    original_store = services.commits_store

    def store_then_lose_the_worker(**kwargs):
        new = original_store(**kwargs)
        # The first worker stops reporting after its first batch: its lease goes stale and is taken over.
        Job.objects.filter(id=job.job_id).update(lease_token="first-worker-lost", heartbeat_at=timezone.now()
                                                 - timedelta(seconds=settings.COMMITGYM_JOB_STALE_SECONDS + 1))
        monkeypatch.setattr(services, "commits_store", original_store)
        return new

    monkeypatch.setattr(services, "commits_store", store_then_lose_the_worker)
    assert job_run(job_id=job.job_id) is True  # it stops at its next write: another worker holds the job
    assert Commit.objects.filter(repository=repository).count() == 3
    assert job_run(job_id=job.job_id) is True
    job.refresh_from_db()
    assert job.state == MiningJob.State.SUCCEEDED and job.new_commits == 10
    assert Commit.objects.filter(repository=repository).count() == 10


@pytest.mark.django_db
def test_queued_job_can_be_cancelled_and_then_does_not_run(small_repository):
    job, _ = mining_job_start(repository=small_repository)
    mining_job_cancel(job=job)
    job_run(job_id=job.job_id)
    job.refresh_from_db()
    assert job.state == MiningJob.State.CANCELLED and job.started_at is None


@pytest.mark.django_db
def test_changing_limits_refilters_stored_commits_without_walking(small_repository, monkeypatch):
    import apps.repositories.services as services

    monkeypatch.setattr(services, "commits_walk", lambda *a, **k: pytest.fail("history walked"))
    monkeypatch.setattr(services, "mirror_sync", lambda *a, **k: pytest.fail("repository fetched"))
    job = repository_filters_update(repository=small_repository, max_files=0, max_lines=100, max_patch_chars=2000,
                                    test_file_globs=small_repository.test_file_globs,
                                    test_dir_names=small_repository.test_dir_names)
    assert job.refilter_only and job.state == MiningJob.State.QUEUED
    job_run(job_id=job.job_id)
    job.refresh_from_db()
    assert job.state == MiningJob.State.SUCCEEDED and job.progress_done == job.progress_total == 4
    reasons = _reasons(small_repository)
    assert reasons["Fix add returning the difference"] == "too_many_files"
    assert reasons["Add logo"] == "binary_file"
    assert not Task.objects.filter(repository=small_repository).exists()

    small_repository.max_files = 5
    small_repository.save()
    assert commits_refilter(repository=small_repository) == {"kept": 2, "dropped": 0}
    assert Task.objects.filter(repository=small_repository).count() == 2


@pytest.mark.django_db
def test_filters_wait_for_a_running_job(small_repository):
    job, _ = mining_job_start(repository=small_repository)
    with pytest.raises(RepositoryBusy):
        repository_filters_update(repository=small_repository, max_files=1, max_lines=1, max_patch_chars=1,
                                  test_file_globs=["x"], test_dir_names=[])
    small_repository.refresh_from_db()
    assert small_repository.max_files == 5 and small_repository.test_file_globs != ["x"]


@pytest.mark.django_db
def test_a_refilter_job_fetches_a_missing_mirror_first(small_repository):
    import shutil

    shutil.rmtree(small_repository.mirror_dir)
    job = repository_filters_update(repository=small_repository, max_files=5, max_lines=1000, max_patch_chars=9000,
                                    test_file_globs=small_repository.test_file_globs,
                                    test_dir_names=small_repository.test_dir_names)
    job_run(job_id=job.job_id)
    job.refresh_from_db()
    assert job.state == MiningJob.State.SUCCEEDED, job.error_message
    assert (small_repository.mirror_dir / "HEAD").exists()


@pytest.mark.django_db
def test_refilter_checks_python_changes_of_commits_it_newly_lets_through(git_repo):
    git_repo.commit("init", {"pkg/a.py": "x = 1\n"})
    git_repo.commit("big docstring edit", {"pkg/a.py": '"""' + "doc\n" * 150 + '"""\nx = 1\n'})
    repository = repository_register(location=str(git_repo.path))
    mine_now(repository)
    commit = Commit.objects.get(repository=repository, message="big docstring edit")
    assert commit.drop_reason == "too_many_lines" and commit.python_change is None
    repository.max_lines = 1000
    repository.save()
    commits_refilter(repository=repository)
    commit.refresh_from_db()
    assert commit.drop_reason == "no_python_change" and commit.python_change is False


@pytest.mark.django_db
def test_new_test_file_rules_remeasure_every_commit(small_repository):
    job = repository_filters_update(repository=small_repository, max_files=5, max_lines=100, max_patch_chars=2000,
                                    test_file_globs=["test_*.py"], test_dir_names=["lib"])
    assert not job.refilter_only
    job_run(job_id=job.job_id)
    fix = Commit.objects.get(repository=small_repository, message="Fix add returning the difference")
    assert fix.source_file_count == 0 and fix.test_file_count == 2 and fix.drop_reason == "no_python_change"
    assert Commit.objects.filter(repository=small_repository).count() == 4


@pytest.mark.django_db
def test_a_host_that_cannot_be_reached_is_registered_with_a_warning_and_its_job_says_why(tmp_path):
    repository = repository_register(location="http://127.0.0.1:9/nothing.git")
    assert "127.0.0.1 could not be asked whether the repository is there" in repository.registration_warning
    job = mine_now(repository)
    assert job.state == MiningJob.State.FAILED and job.error_code == "unreachable" and job.error_message


@pytest.mark.django_db
def test_empty_repository_fails_with_a_reason(git_repo):
    job = mine_now(repository_register(location=str(git_repo.path)))
    assert job.state == MiningJob.State.FAILED and job.error_code == "empty_repository"


@pytest.mark.django_db
def test_a_failed_fetch_loses_nothing_already_mined(small_repository, git_repo):
    import shutil

    count = Commit.objects.filter(repository=small_repository).count()
    shutil.rmtree(git_repo.path)
    job = mine_now(small_repository)
    assert job.state == MiningJob.State.FAILED and job.error_code == "not_a_repository"
    assert Commit.objects.filter(repository=small_repository).count() == count


@pytest.mark.django_db
def test_token_in_url_is_split_off_and_stored_encrypted():
    repository = repository_register(location="http://reader:s3cr3t-token@127.0.0.1:9/team/private.git")
    assert repository.url == "http://127.0.0.1:9/team/private.git" and repository.name == "team/private"
    assert "s3cr3t-token" not in repository.credential_token
    assert repository.git_credentials().token == "s3cr3t-token"
    job = mine_now(repository)
    assert job.state == MiningJob.State.FAILED
    assert "s3cr3t-token" not in job.error_message


@pytest.mark.django_db
def test_deleting_a_repository_removes_rows_and_mirror(small_repository):
    mirror = small_repository.mirror_dir
    assert mirror.exists()
    repository_delete(repository=small_repository)
    assert not mirror.exists()
    assert not Commit.objects.exists() and not Task.objects.exists() and not MiningJob.objects.exists()


@pytest.mark.django_db
def test_a_wrong_token_ends_the_job_as_auth_failed_and_the_token_stays_secret(refusing_git_server):
    """A token revoked after registering (registering checks it: see test_registration_refuses_...)."""
    from apps.repositories.secrets import secret_encrypt

    url, seen = refusing_git_server
    repository = Repository.objects.create(name="team/private", url=url, credential_username="reader",
                                           credential_token=secret_encrypt("s3cr3t-token"))
    job = mine_now(repository)
    assert job.state == MiningJob.State.FAILED and job.error_code == "auth_failed"
    assert any(header and header.startswith("Basic ") for header in seen)
    assert "s3cr3t-token" not in job.error_message and "s3cr3t-token" not in repository.credential_token


@pytest.mark.django_db
def test_credentials_that_cannot_be_decrypted_end_the_job_with_that_reason(small_repository, settings):
    small_repository.credential_token = "not-a-fernet-token"
    small_repository.save()
    job = mine_now(small_repository)
    assert job.state == MiningJob.State.FAILED and job.error_code == "credentials_unreadable"


@pytest.mark.django_db
def test_a_job_whose_worker_died_is_taken_over_when_stale(small_repository, git_repo, settings):
    from datetime import timedelta

    from django.utils import timezone

    git_repo.commit("More", {"lib/calc.py": "def add(a, b):\n    return a + b + 0\n"})
    job = mining_job_make(small_repository, state=MiningJob.State.RUNNING, heartbeat_at=timezone.now(),
                          lease_token="dead-worker")
    assert job_run(job_id=job.job_id) is False  # its holder may still be alive: try later
    Job.objects.filter(id=job.job_id).update(
        heartbeat_at=timezone.now() - timedelta(seconds=settings.COMMITGYM_JOB_STALE_SECONDS + 1))
    assert job_run(job_id=job.job_id) is True
    job.refresh_from_db()
    assert job.state == MiningJob.State.SUCCEEDED and job.new_commits == 1 and job.job.lease_token != "dead-worker"


@pytest.mark.django_db
def test_a_stale_running_job_does_not_block_new_work(small_repository, settings):
    from datetime import timedelta

    from django.utils import timezone

    stale = mining_job_make(small_repository, state=MiningJob.State.RUNNING,
                            heartbeat_at=timezone.now() - timedelta(seconds=settings.COMMITGYM_JOB_STALE_SECONDS + 1))
    job, created = mining_job_start(repository=small_repository)
    stale.refresh_from_db()
    assert created and job.id != stale.id
    assert stale.state == MiningJob.State.FAILED and stale.error_code == "worker_lost"


@pytest.mark.django_db
def test_a_job_taken_over_stops_writing(small_repository):
    from apps.jobs.leases import Lease, LeaseLost
    from apps.jobs.services import JobProgress

    job = mining_job_make(small_repository)
    lease = Lease.claim(Job, job.job_id, waiting_state="queued", running_state="running")
    Job.objects.filter(id=job.job_id).update(lease_token="someone-else")
    with pytest.raises(LeaseLost):
        JobProgress(lease, job.job).report(1)


@pytest.mark.django_db(transaction=True)  # the heartbeat writes through its own connection
def test_the_heartbeat_keeps_a_long_step_fresh(settings):
    import time

    from apps.jobs.leases import Lease
    from apps.repositories.models import Repository

    settings.COMMITGYM_JOB_HEARTBEAT_SECONDS = 0.05
    job = mining_job_make(Repository.objects.create(name="o/r", url="/nowhere"))
    lease = Lease.claim(Job, job.job_id, waiting_state="queued", running_state="running")
    before = Job.objects.get(id=job.job_id).heartbeat_at
    with lease:
        time.sleep(0.3)
    assert Job.objects.get(id=job.job_id).heartbeat_at > before


@pytest.mark.django_db
def test_retrying_a_failed_refilter_refilters(small_repository):
    from apps.repositories.services import mining_job_retry

    job = repository_filters_update(repository=small_repository, max_files=0, max_lines=100, max_patch_chars=2000,
                                    test_file_globs=small_repository.test_file_globs,
                                    test_dir_names=small_repository.test_dir_names)
    mining_job_cancel(job=job)
    retry = mining_job_retry(job=MiningJob.objects.get(id=job.id))
    assert retry.refilter_only
    job_run(job_id=retry.job_id)
    assert not Task.objects.filter(repository=small_repository).exists()


@pytest.mark.django_db
def test_curators_register_local_folders_only_under_allowed_roots(curator, admin_user, git_repo, settings, tmp_path):
    from apps.repositories.services import RepositoryRefused

    git_repo.commit("one", {"a.py": "x = 1\n"})
    settings.COMMITGYM_LOCAL_ROOTS = []
    with pytest.raises(RepositoryRefused):
        repository_register(location=str(git_repo.path), user=curator)
    with pytest.raises(RepositoryRefused):
        repository_register(location=f"file://{git_repo.path}", user=curator)
    assert repository_register(location=str(git_repo.path), user=admin_user).url == str(git_repo.path)
    settings.COMMITGYM_MIRROR_DIR.mkdir(parents=True, exist_ok=True)
    with pytest.raises(RepositoryRefused):
        repository_register(location=str(settings.COMMITGYM_MIRROR_DIR / "1.git"), user=admin_user)
    with pytest.raises(RepositoryRefused):
        repository_register(location=str(settings.COMMITGYM_MIRROR_DIR / "1.git"))


@pytest.mark.django_db
@pytest.mark.parametrize("name", ["no-slash", "a__b/c", "a/b/c", "own er/x", "a/<b>"])
def test_names_must_make_unambiguous_task_ids(git_repo, name):
    from apps.repositories.services import RepositoryRefused

    with pytest.raises(RepositoryRefused):
        repository_register(location=str(git_repo.path), name=name)


def test_names_derived_from_locations_are_valid():
    from apps.repositories.services import REPOSITORY_NAME, repository_name_from_location

    for location, name in [("https://h/acme/my lib.git", "acme/my-lib"), ("/srv/x__y/über repo", "local/ber-repo"),
                           ("git@h:o__x/r.git", "o_x/r"), ("https://h/solo", "remote/solo")]:
        assert repository_name_from_location(location) == name
        assert REPOSITORY_NAME.fullmatch(name)


@pytest.mark.django_db
def test_a_job_stopped_by_its_time_limit_keeps_tasks_for_what_it_stored(git_repo, monkeypatch):
    from celery.exceptions import SoftTimeLimitExceeded

    import apps.repositories.services as services

    repository = _repository_of_small_changes(git_repo, 6, monkeypatch)
    original_store = services.commits_store
    calls = []

    def store_then_time_out(**kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise SoftTimeLimitExceeded()
        return original_store(**kwargs)

    monkeypatch.setattr(services, "commits_store", store_then_time_out)
    job = mine_now(repository)
    assert (job.state, job.error_code) == (MiningJob.State.FAILED, "timeout")
    stored = Commit.objects.filter(repository=repository)
    assert stored.count() == 3 and Task.objects.filter(commit__in=stored).count() == 3


@pytest.mark.django_db
def test_a_refilter_gives_a_task_to_every_kept_commit_without_one(small_repository):
    Task.objects.filter(repository=small_repository).delete()
    commits_refilter(repository=small_repository)
    kept = Commit.objects.filter(repository=small_repository, drop_reason="")
    assert Task.objects.filter(commit__in=kept).count() == kept.count() == 2
    assert all(task.state_changes.count() == 1 for task in Task.objects.filter(repository=small_repository))


@pytest.mark.django_db
def test_a_local_folder_replaced_by_a_link_to_another_repository_is_not_fetched(admin_user, tmp_path, settings):
    from tests.gitrepo import GitRepo

    first = GitRepo(tmp_path / "first")
    first.commit("one", {"a.py": "x = 1\n"})
    private = GitRepo(tmp_path / "private")
    private.commit("secret", {"secret.py": "KEY = 1\n"})
    repository = repository_register(location=str(first.path), user=admin_user)
    assert mine_now(repository).state == MiningJob.State.SUCCEEDED
    shutil.move(first.path, tmp_path / "first-moved")
    os.symlink(private.path, first.path)
    job = mine_now(repository)
    assert job.state == MiningJob.State.FAILED and job.error_code == "location_refused", job.error_message
    assert f"{first.path} is now a link to {private.path}" in job.error_message
    assert not Commit.objects.filter(repository=repository, message__contains="secret").exists()


@pytest.mark.django_db
def test_a_local_folder_outside_the_allowed_roots_now_is_not_fetched(curator, tmp_path, settings):
    from tests.gitrepo import GitRepo

    allowed = tmp_path / "allowed"
    repo = GitRepo(allowed / "repo")
    repo.commit("one", {"a.py": "x = 1\n"})
    settings.COMMITGYM_LOCAL_ROOTS = [str(allowed)]
    repository = repository_register(location=str(repo.path), user=curator)
    settings.COMMITGYM_LOCAL_ROOTS = [str(tmp_path / "elsewhere")]
    job = mine_now(repository)
    assert job.state == MiningJob.State.FAILED and job.error_code == "location_refused"


@pytest.mark.django_db
def test_a_local_repository_borrowing_another_ones_objects_is_not_fetched(admin_user, tmp_path):
    from tests.gitrepo import GitRepo

    repo = GitRepo(tmp_path / "borrower")
    repo.commit("one", {"a.py": "x = 1\n"})
    repository = repository_register(location=str(repo.path), user=admin_user)
    (repo.path / ".git" / "objects" / "info" / "alternates").write_text(str(tmp_path / "other" / "objects") + "\n")
    job = mine_now(repository)
    assert job.state == MiningJob.State.FAILED and job.error_code == "location_refused"
    assert "borrows objects" in job.error_message


@pytest.mark.django_db
@pytest.mark.parametrize("scheme", ["FILE", "File"])
def test_a_file_url_in_any_case_is_a_local_folder(curator, git_repo, settings, scheme):
    from apps.repositories.services import RepositoryRefused

    git_repo.commit("one", {"a.py": "x = 1\n"})
    settings.COMMITGYM_LOCAL_ROOTS = []
    with pytest.raises(RepositoryRefused):
        repository_register(location=f"{scheme}://{git_repo.path}", user=curator)
    with pytest.raises(RepositoryRefused):
        repository_register(location=f"{scheme}:///etc", user=curator)


@pytest.mark.django_db
def test_a_token_in_the_query_string_is_split_off_and_never_shown_or_logged():
    repository = repository_register(location="http://127.0.0.1:9/team/private.git?access_token=q5ecret-tok&ref=x")
    assert repository.url == "http://127.0.0.1:9/team/private.git?ref=x"
    assert repository.git_credentials().token == "q5ecret-tok"
    job = mine_now(repository)
    assert job.state == MiningJob.State.FAILED and "q5ecret-tok" not in job.error_message
    # The handlers the settings configure take it out of whatever is logged, tracebacks included.
    (handler,) = [h for h in logging.getLogger().handlers if isinstance(h, logging.StreamHandler)
                  and any(type(f).__name__ == "CredentialsRedacted" for f in h.filters)]
    written = io.StringIO()
    previous = handler.setStream(written)
    try:
        logging.getLogger("apps.repositories").warning("fetch of %s failed", "http://h/x.git?private_token=q5ecret-tok")
        try:
            raise RuntimeError("while fetching https://reader:q5ecret-tok@h/x.git")
        except RuntimeError:
            logging.getLogger("apps.repositories").exception("mining failed")
    finally:
        handler.setStream(previous)
    assert "q5ecret-tok" not in written.getvalue() and "private_token=***" in written.getvalue()
    assert "https://***@h/x.git" in written.getvalue()


@pytest.mark.django_db
def test_merges_are_in_the_funnel_as_a_reason_of_their_own(git_repo):
    from apps.repositories.selectors import repository_mining_summary

    git_repo.commit("Initial library", {"lib/calc.py": "def add(a, b):\n    return a - b\n"})
    git_repo.git("checkout", "-q", "-b", "topic")
    git_repo.commit("Fix add returning the difference", {"lib/calc.py": "def add(a, b):\n    return a + b\n"})
    git_repo.git("checkout", "-q", "-")
    git_repo.commit("Document add", {"README.md": "# calc\n"})
    git_repo.git("-c", "user.name=M", "-c", "user.email=m@example.com", "merge", "-q", "--no-ff", "topic",
                 "-m", "Merge branch topic")
    repository = repository_register(location=str(git_repo.path))
    job = mine_now(repository)
    assert job.state == MiningJob.State.SUCCEEDED and job.progress_total == 4
    merge = Commit.objects.get(repository=repository, message="Merge branch topic")
    assert merge.drop_reason == "merge_commit" and not merge.tasks.exists()
    summary = repository_mining_summary(repository=repository)
    assert summary["commits_seen"] == int(git_repo.git("rev-list", "--count", "HEAD")) == 4
    assert summary["dropped"]["merge_commit"] == 1 and summary["kept"] + sum(summary["dropped"].values()) == 4
    # Filters applied again leave a merge as it is.
    commits_refilter(repository=repository)
    assert Commit.objects.get(id=merge.id).drop_reason == "merge_commit"
