import fcntl
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client

from apps.jobs.services import job_run
from apps.repositories.models import MiningJob
from apps.repositories.services import mining_job_start, repository_register
from tests.gitrepo import GitRepo


@pytest.fixture(autouse=True)
def _alone_or_beside_others(request):
    """Test processes run side by side (pytest-xdist): a test marked `alone` leaves on purpose what the
    others check was not left (a dead worker's container, say), so it runs while no other test runs in any
    of them. A gate before the shared lock keeps it from waiting behind a stream of others."""
    folder = Path(tempfile.gettempdir())
    with open(folder / "commitgym-tests-gate", "a") as gate, open(folder / "commitgym-tests-room", "a") as room:
        alone = request.node.get_closest_marker("alone") is not None
        fcntl.flock(gate, fcntl.LOCK_EX)
        fcntl.flock(room, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        if not alone:
            fcntl.flock(gate, fcntl.LOCK_UN)
        yield


@pytest.fixture(autouse=True)
def _local_folders(settings, tmp_path):
    """Mirrors go to the test's own folder, and its repositories may be registered by curators."""
    settings.COMMITGYM_MIRROR_DIR = tmp_path / "mirrors"
    settings.COMMITGYM_LOCAL_ROOTS = [str(tmp_path)]


@pytest.fixture(autouse=True)
def _cache_cleared():
    """Lists the pages cache for a minute (the reviewers, the reasons) start empty in each test."""
    from django.core.cache import cache

    cache.clear()


def user_with_role(username: str, role: str) -> User:
    user = User.objects.create_user(username=username, password="pw-" + username)
    # Transactional tests flush the database afterwards, taking the roles' groups with it.
    user.groups.add(Group.objects.get_or_create(name=role)[0])
    return user


@pytest.fixture
def curator(db):
    return user_with_role("carla", "curator")


@pytest.fixture
def annotator(db):
    return user_with_role("anton", "annotator")


@pytest.fixture
def admin_user(db):
    return user_with_role("ada", "admin")


@pytest.fixture
def curator_client(curator) -> Client:
    client = Client()
    client.force_login(curator)
    return client


@pytest.fixture
def annotator_client(annotator) -> Client:
    client = Client()
    client.force_login(annotator)
    return client


@pytest.fixture
def git_repo(tmp_path) -> GitRepo:
    return GitRepo(tmp_path / "project")


def commands_database_url() -> str:
    """DATABASE_URL pointing at the test database, for processes the tests start (commands)."""
    import os
    from urllib.parse import urlsplit, urlunsplit

    from django.conf import settings

    parts = urlsplit(os.environ["DATABASE_URL"])
    return urlunsplit(parts._replace(path="/" + settings.DATABASES["default"]["NAME"]))


def record_model_answer(*, role: str, prompt, variables: dict, answer: str, max_tokens: int, task=None):
    """Store a call as if the role's model had answered `answer` to this prompt: the cache then
    gives it to the job that asks the same (a known answer from a weak model, for a test)."""
    from apps.llm.calls import model_call_cache_key, role_settings
    from apps.llm.models import ModelCall

    messages = prompt.messages(**variables)
    parameters = {"max_tokens": max_tokens, "temperature": 0.0, "seed": 0}
    return ModelCall.objects.create(
        role=role, backend="embedded", model="recorded", prompt_name=prompt.name, prompt_version=prompt.version,
        prompt_digest=prompt.digest, messages=messages, parameters=parameters, answer=answer, outcome="ok",
        cache_key=model_call_cache_key(role, role_settings(role), prompt, messages, parameters), task=task)


def mining_job_make(repository, **job_fields) -> MiningJob:
    """A mining job row as mining_job_start makes one, without publishing it to a worker; its
    job's life (state, heartbeat, lease, error) as given."""
    from apps.jobs.models import Job

    job = Job.objects.create(kind="mining", subject_type="repositories.repository", subject_id=repository.pk,
                             subject_label=repository.name, **job_fields)
    return MiningJob.objects.create(job=job, repository=repository)


def mine_now(repository) -> MiningJob:
    """Run a mining job in this process, as a worker would, with this test's settings (its mirrors'
    folder): its message is not sent, so the suite's worker process, started by an earlier test, does not
    take it and mine into its own folder. A job already under way elsewhere is waited for."""
    from unittest import mock

    from apps.jobs.models import Job

    with mock.patch("apps.jobs.services.job_dispatch"):
        job, _ = mining_job_start(repository=repository)
    job_run(job_id=job.job_id)
    wait_until(lambda: Job.objects.filter(id=job.job_id).exclude(state__in=Job.ACTIVE_STATES).exists(),
               what="the mining job's end")
    job.refresh_from_db()
    return job


@pytest.fixture
def small_repository(db, git_repo, curator):
    """A registered, mined repository: a kept fix, a docs-only commit, a binary file."""
    git_repo.commit("Initial library", {"lib/calc.py": "def add(a, b):\n    return a - b\n",
                                        "README.md": "# calc\n"})
    git_repo.commit("Fix add returning the difference", {
        "lib/calc.py": "def add(a, b):\n    return a + b\n",
        "tests/test_calc.py": "from lib.calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n",
    })
    git_repo.commit("Document add", {"README.md": "# calc\n\n`add(a, b)` adds.\n"})
    git_repo.commit("Add logo", {"docs/logo.png": b"\x89PNG\r\n\x1a\n\x00\x00binary", "lib/calc.py":
                                 "def add(a, b):\n    return b + a\n"})
    repository = repository_register(location=str(git_repo.path), user=curator)
    job = mine_now(repository)
    assert job.state == MiningJob.State.SUCCEEDED, job.error_message
    return repository


@pytest.fixture(scope="session")
def _worker_mirror_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("worker-mirrors")


@pytest.fixture(scope="session")
def _celery_worker_process(django_db_setup, _worker_mirror_dir, tmp_path_factory):
    """A real Celery worker process on the configured broker, using the test database."""
    import os
    import signal
    import subprocess
    import sys
    import time
    from urllib.parse import urlsplit, urlunsplit

    import redis
    from django.conf import settings

    broker = settings.CELERY_BROKER_URL
    source_url = os.environ.get("DATABASE_URL", "")
    if not broker.startswith("redis://") or not source_url.startswith("postgres"):
        pytest.fail("end-to-end tests need DATABASE_URL=postgres://... and CELERY_BROKER_URL=redis://... "
                    "(make test sets both)")
    redis.Redis.from_url(broker).flushdb()
    parts = urlsplit(source_url)
    commands_database_url = urlunsplit(parts._replace(path="/" + settings.DATABASES["default"]["NAME"]))
    # Two runs a side and a 10 s per-test timeout keep validations of hanging tests short.
    env = {**os.environ, "DATABASE_URL": commands_database_url, "CELERY_BROKER_URL": broker,
           "COMMITGYM_MIRROR_DIR": str(_worker_mirror_dir), "COMMITGYM_VALIDATION_RERUNS": "1",
           "COMMITGYM_TEST_TIMEOUT": "10",
           # Runs that allocate without bound meet the limit, not the memory of a busy CI machine.
           "COMMITGYM_SANDBOX_MEMORY_MB": "1024",
           # As the web app's settings allow each test's own folder (_local_folders): the worker
           # checks a local repository's folder again before every fetch.
           "COMMITGYM_LOCAL_ROOTS": str(tmp_path_factory.getbasetemp())}
    log_path = _worker_mirror_dir.parent / "worker.log"
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "worker.celery_app", "worker", "-Q", settings.COMMITGYM_WORKER_QUEUES,
             "--concurrency", "1", "--without-gossip", "--without-mingle", "--without-heartbeat", "-l", "INFO"],
            env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )
    deadline = time.monotonic() + 60
    while "ready." not in log_path.read_text():
        if proc.poll() is not None or time.monotonic() > deadline:
            pytest.fail("the Celery worker did not start:\n" + log_path.read_text())
        time.sleep(0.2)
    yield proc
    os.killpg(proc.pid, signal.SIGTERM)
    proc.wait(timeout=30)


@pytest.fixture
def celery_worker(_celery_worker_process, _worker_mirror_dir, settings, transactional_db):
    """Jobs published in this test run in the real worker process; mirrors are shared with it."""
    settings.COMMITGYM_MIRROR_DIR = _worker_mirror_dir
    return _celery_worker_process


@pytest.fixture
def refusing_git_server():
    """An HTTP server on loopback that asks for credentials and refuses all of them."""
    seen_authorization = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's naming
            seen_authorization.append(self.headers.get("Authorization"))
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="git"')
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/team/private.git", seen_authorization
    server.shutdown()


def worker_start(tmp_path, name: str, queues: str, env_extra: dict):
    """A worker process of its own on `queues` (the tests' broker and database), its log in tmp_path."""
    import os
    import subprocess
    import sys

    log = tmp_path / f"{name}.log"
    env = {**os.environ, "DATABASE_URL": commands_database_url(), **env_extra}
    with open(log, "w") as output:
        process = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "worker.celery_app", "worker", "-Q", queues, "-n", f"{name}@%h",
             "--concurrency", "1", "--without-gossip", "--without-mingle", "--without-heartbeat", "-l", "INFO"],
            env=env, stdout=output, stderr=subprocess.STDOUT, start_new_session=True)
    wait_until(lambda: "ready." in log.read_text() or process.poll() is not None, timeout=60,
               what=f"worker {name} to start")
    assert process.poll() is None, log.read_text()
    return process


def process_group_kill(process) -> None:
    """SIGKILL a worker and every process it started: nothing it holds is let go cleanly."""
    import os
    import signal

    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait(timeout=30)


def validation_make(task, *, state="succeeded", **fields):
    """A validation of the task as a worker would have left it, its job in `state`."""
    from apps.jobs.models import Job
    from apps.tasks.models import Validation

    job = Job.objects.create(kind="validation", subject_type="tasks.task", subject_id=task.id,
                             subject_label=task.instance_id, state=state)
    return Validation.objects.create(job=job, task=task, **fields)


def task_put_in_review(task, *, fail_to_pass=("tests/test_calc.py::test_add",),
                       pass_to_pass=("tests/test_other.py::test_ok",), issue="add() returns the difference"):
    """Make a task valid with a finished validation (its runs recorded) and an issue, so it waits for
    review: what validation and the issue writer would have left."""
    from apps.tasks.models import IssueVersion, Task, TaskStateChange, TestRunRecord
    from apps.tasks.states import task_review_open, task_summary_refresh

    validation = validation_make(task, verdict="valid", fail_to_pass=list(fail_to_pass),
                                 pass_to_pass=list(pass_to_pass))
    tests = [*fail_to_pass, *pass_to_pass]
    for side, f2p_status in (("before", "FAILED"), ("after", "PASSED")):
        TestRunRecord.objects.create(validation=validation, side=side, scope="selected", status="ok",
                                     output=f"{side} run output", outcomes={
                                         test: f2p_status if test in fail_to_pass else "PASSED" for test in tests})
    # The validation's moves (mined → building → validating → valid) in one step, as one recorded change.
    from django.utils import timezone

    if Task.objects.filter(id=task.id, state="mined").update(state="valid", reason="", updated_at=timezone.now()):
        TaskStateChange.objects.create(task=task, from_state="mined", to_state="valid")
    IssueVersion.objects.create(task=task, number=1, author="model", text=issue, leak_score=0.1)
    task_review_open(task_id=task.id)
    task_summary_refresh(task.id)
    task.refresh_from_db()
    return task


def commits_and_tasks_make(repository, count: int, *, start: int = 0):
    """Tasks on commits made up for the list and the queue (no git history behind them)."""
    from django.utils import timezone

    from apps.repositories.models import Commit
    from apps.tasks.models import Task

    now = timezone.now()
    commits = Commit.objects.bulk_create([
        Commit(repository=repository, sha=f"{i:010x}{'c' * 30}", parent_sha=f"{i + 1:010x}{'c' * 30}", author_name="a", author_email="a@x",
               authored_at=now, committed_at=now, message=f"Fix bug number {i}\n\nbody {i}") for i in
        range(start, start + count)])
    return Task.objects.bulk_create([
        Task(instance_id=f"o__r-{commit.sha[:10]}-{repository.pk}", repository=repository, commit=commit)
        for commit in commits])


def wait_until(check, *, timeout: float = 120, what: str = "the condition"):
    """Poll `check()` until it returns something true; fail after `timeout` seconds."""
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = check()
        if result:
            return result
        time.sleep(0.2)
    raise AssertionError(f"{what} did not happen within {timeout} s")


def ssh_private_key() -> str:
    """A fresh Ed25519 private key in OpenSSH's format, as a person pastes one."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    return Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()).decode()
