"""The task, validation and environment pages, with validation rows made directly (no real validation runs)."""

import re

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client
from django.urls import reverse

from apps.environments.models import Environment
from apps.jobs.models import Job
from apps.llm.models import ModelCall
from apps.repositories.models import Commit, Repository
from apps.tasks.models import (
    EnvironmentAttempt,
    GeneratedTest,
    IssueVersion,
    Task,
    TaskStateChange,
    TestRunRecord,
    Validation,
)
from tests.conftest import validation_make
from worker.engine.reasons import reason_sentence

HTMX = {"HX-Request": "true"}
F2P = "tests/test_calc.py::test_add"
FLAKY = "tests/test_calc.py::test_sometimes"
P2P = "tests/test_calc.py::test_sub"
LOCK = "attrs==23.2.0\npytest==8.1.1\n"


def html(response) -> str:
    return response.content.decode()


def text_of(page: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", " ", page).split())


def make_task(repository: Repository, n: int, *, state: str = Task.State.MINED) -> Task:
    """A task on a commit row of its own (no git history needed)."""
    commit = Commit.objects.create(
        repository=repository, sha=f"{n:040x}", parent_sha=f"{n + 1000:040x}", message=f"Fix number {n}\n",
        author_name="A", author_email="a@example.com",
        authored_at="2024-01-01T00:00:00Z", committed_at="2024-01-01T00:00:00Z")
    owner, name = repository.owner_and_name
    task = Task.objects.create(instance_id=f"{owner}__{name}-{n:010x}", repository=repository, commit=commit,
                               state=state)
    TaskStateChange.objects.create(task=task, from_state="", to_state=Task.State.MINED)
    return task


def make_environment(repository, key="env-" + "a" * 20, network="index_proxy") -> Environment:
    return Environment.objects.create(key=key, python_version="3.11", lock=LOCK, path="/envs/x",
                                      build_network=network, repository=repository)


def make_validation(task: Task, environment=None, *, verdict="valid", reason="", runs=2,
                    output="ok") -> Validation:
    """A finished validation: F2P fails before and passes after, one flaky test, one P2P test."""
    validation = validation_make(
        task, verdict=verdict, reason=reason, environment=environment,
        fail_to_pass=[F2P], pass_to_pass=[P2P], flaky=[FLAKY], seconds=12.5)
    EnvironmentAttempt.objects.create(validation=validation, strategy="uv-pip-editable",
                                      commands=["uv pip install -e ."], status="ok", step="", output=output,
                                      seconds=3.0)
    for i in range(runs):
        TestRunRecord.objects.create(validation=validation, side="before", scope="selected", index=i,
                                     status="failed", outcomes={F2P: "FAILED", P2P: "PASSED",
                                                                FLAKY: "PASSED" if i else "FAILED"},
                                     output=output, seconds=1.0)
        TestRunRecord.objects.create(validation=validation, side="after", scope="selected", index=i,
                                     status="passed", outcomes={F2P: "PASSED", P2P: "PASSED", FLAKY: "PASSED"},
                                     output=output, seconds=1.0)
    TestRunRecord.objects.create(validation=validation, side="gold", scope="graded", status="passed",
                                 outcomes={F2P: "PASSED", P2P: "PASSED"})
    TestRunRecord.objects.create(validation=validation, side="empty", scope="graded", status="failed",
                                 outcomes={F2P: "FAILED"})
    return validation


@pytest.fixture
def repository(db):
    return Repository.objects.create(name="acme/calc", url="/nowhere/calc")


@pytest.fixture
def task(repository):
    return make_task(repository, 1, state=Task.State.VALID)


@pytest.fixture
def hidden(repository):
    """The repository restricted to a group the test users are not in."""
    repository.allowed_groups.set([Group.objects.create(name="secret")])
    return repository


def matrix_cell(page: str, test: str, column: int) -> str:
    """The text of the `column`-th outcome cell (0-based) of the first matrix row of `test`."""
    row = re.search(rf"<tr[^>]*>\s*<th scope=\"row\" class=\"test-id\"><code>{re.escape(test)}</code>.*?</tr>",
                    page, re.S)
    assert row, test
    return re.findall(r'<td class="outcome [^"]*">([^<]*)</td>', row.group(0))[column]


# --- login and permissions -------------------------------------------------------------------


def test_pages_need_a_login(task):
    environment = make_environment(task.repository)
    client = Client()
    for url in [reverse("tasks:list", args=[task.repository.pk]), reverse("tasks:detail", args=[task.instance_id]),
                reverse("environments:list"), reverse("environments:detail", args=[environment.key])]:
        response = client.get(url)
        assert response.status_code == 302 and response["Location"].startswith(reverse("login")), url


def test_hidden_repository_is_404_on_task_and_environment_pages(curator_client, task, hidden):
    environment = make_environment(task.repository)
    make_validation(task, environment)
    for url in [reverse("tasks:list", args=[task.repository.pk]), reverse("tasks:detail", args=[task.instance_id]),
                reverse("tasks:validation", args=[task.instance_id]),
                reverse("environments:detail", args=[environment.key])]:
        assert curator_client.get(url, headers=HTMX).status_code == 404, url
    assert curator_client.post(reverse("tasks:validate", args=[task.instance_id])).status_code == 404
    assert environment.key not in html(curator_client.get(reverse("environments:list")))
    assert Validation.objects.count() == 1


def test_annotator_sees_no_button_and_gets_403(annotator_client, task):
    page = html(annotator_client.get(reverse("tasks:detail", args=[task.instance_id])))
    assert reverse("tasks:validate", args=[task.instance_id]) not in page and "Validate" not in page
    assert annotator_client.post(reverse("tasks:validate", args=[task.instance_id])).status_code == 403
    assert not Validation.objects.exists()
    assert Task.objects.get().state == Task.State.VALID


def test_curator_validate_creates_a_validation_and_moves_the_task(curator_client, curator, repository):
    task = make_task(repository, 2)
    page = html(curator_client.get(reverse("tasks:detail", args=[task.instance_id])))
    assert "Validate</button>" in page
    response = curator_client.post(reverse("tasks:validate", args=[task.instance_id]))
    assert response.status_code == 302 and response["Location"] == reverse("tasks:detail", args=[task.instance_id])
    validation = Validation.objects.get()
    assert validation.task == task and validation.state == Validation.State.QUEUED
    task.refresh_from_db()
    assert task.state == Task.State.BUILDING
    change = TaskStateChange.objects.filter(task=task).last()
    assert (change.from_state, change.to_state, change.actor) == ("mined", "building", curator)

    # A second press while it runs queues nothing, and the page offers no button.
    curator_client.post(reverse("tasks:validate", args=[task.instance_id]))
    assert Validation.objects.count() == 1
    page = html(curator_client.get(reverse("tasks:detail", args=[task.instance_id])))
    assert "Validate again</button>" not in page and "carla" in text_of(page)


# --- the task page ---------------------------------------------------------------------------


def test_task_page_shows_verdict_tests_and_outcomes(curator_client, task):
    environment = make_environment(task.repository)
    earlier = make_validation(task, None, verdict="environment_failed", reason="install_failed", runs=0)
    Validation.objects.filter(pk=earlier.pk).update(created_at="2024-01-01T00:00:00Z")
    latest = make_validation(task, environment, verdict="invalid", reason="breaks_other_tests",
                             output="collected 3 items <script>alert(1)</script>")
    latest.environment_reused = True
    latest.save()
    page = html(curator_client.get(reverse("tasks:detail", args=[task.instance_id])))
    text = text_of(page)

    assert reason_sentence("breaks_other_tests") in text
    assert reverse("environments:detail", args=[environment.key]) in page and "reused from an earlier build" in text
    assert reverse("repositories:commit", args=[task.repository.pk, task.commit.sha]) in page
    assert "Validate again</button>" in page
    # Columns: before #1, before #2, after #1, after #2, gold patch, empty patch.
    assert ["before #1", "before #2", "after #1", "after #2", "gold patch", "empty patch"] == re.findall(
        r'<th class="outcome-head"[^>]*>([^<]+)</th>', page)[:6]
    assert matrix_cell(page, F2P, 0) == "FAILED" and matrix_cell(page, F2P, 2) == "PASSED"
    assert matrix_cell(page, FLAKY, 0) == "FAILED" and matrix_cell(page, FLAKY, 1) == "PASSED"
    assert matrix_cell(page, P2P, 5) == "—"
    assert re.search(rf"<code>{re.escape(FLAKY)}</code> <span class=\"badge badge-flaky\"", page)
    assert '<td class="outcome outcome-failed">FAILED</td>' in page
    assert page.index("Fail-to-Pass</h4>") < page.index("Flaky</h4>") < page.index("<strong>Pass-to-Pass</strong>")
    assert re.search(r"<details class=\"matrix-group\"><summary><strong>Pass-to-Pass", page)

    # Outputs and logs are escaped.
    assert "<script>alert(1)</script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "uv-pip-editable" in page and "uv pip install -e ." in page

    # The earlier validation, and the state history.
    assert "Earlier validations" in text and "environment_failed" in text
    assert "2024-01-01" in text
    assert "History" in text and "commitgym made the task (mined)" in text


def test_running_validation_polls_and_a_finished_one_refreshes(curator_client, task):
    Task.objects.filter(pk=task.pk).update(state=Task.State.VALIDATING)
    validation = validation_make(task, state=Validation.State.QUEUED)
    url = reverse("tasks:validation", args=[task.instance_id])
    assert 'hx-trigger="every 2s"' in html(curator_client.get(url, headers=HTMX))  # queued polls too
    Job.objects.filter(pk=validation.job_id).update(state=Validation.State.RUNNING)

    page = html(curator_client.get(reverse("tasks:detail", args=[task.instance_id])))
    assert f'hx-get="{url}"' in page and 'hx-trigger="every 2s"' in page

    running = curator_client.get(url, headers=HTMX)
    assert running.status_code == 200 and "HX-Refresh" not in running
    assert 'hx-trigger="every 2s"' in html(running) and "<html" not in html(running)

    Job.objects.filter(pk=validation.job_id).update(state=Validation.State.SUCCEEDED)
    Validation.objects.filter(pk=validation.pk).update(verdict="valid")
    done = curator_client.get(url, headers=HTMX)
    assert done["HX-Refresh"] == "true" and "hx-trigger" not in html(done)

    # Without htmx the partial's URL is the task page.
    assert curator_client.get(url)["Location"] == reverse("tasks:detail", args=[task.instance_id])


def test_task_page_queries_are_bounded(curator_client, task, django_assert_max_num_queries):
    environment = make_environment(task.repository)
    for _ in range(4):
        make_validation(task, environment, runs=3)
    for n in range(10):
        TaskStateChange.objects.create(task=task, from_state="mined", to_state="building")
    for n in range(1, 6):
        call = ModelCall.objects.create(role="issue_writer", backend="embedded", model="m", prompt_name="p",
                                        prompt_version=1, prompt_digest="d", cache_key="k", outcome="ok", task=task)
        IssueVersion.objects.create(task=task, number=n, text=f"version {n}", author="model", model_call=call)
        GeneratedTest.objects.create(task=task, model_call=call, index=n, content="def test_x(): pass")
    with django_assert_max_num_queries(20):
        response = curator_client.get(reverse("tasks:detail", args=[task.instance_id]))
    assert response.status_code == 200


# --- the task list ---------------------------------------------------------------------------


def test_task_list_filters_by_state_with_counts(curator_client, repository):
    environment = make_environment(repository)
    valid = make_task(repository, 1, state=Task.State.VALID)
    make_validation(valid, environment)
    invalid = make_task(repository, 2, state=Task.State.INVALID)
    Task.objects.filter(pk=invalid.pk).update(reason="no_fail_to_pass")
    make_task(repository, 3)
    url = reverse("tasks:list", args=[repository.pk])

    page = html(curator_client.get(url))
    assert "All (3)" in page and "Valid (1)" in page and "Invalid (1)" in page and "Mined (1)" in page
    assert f'href="{reverse("tasks:review", args=[valid.instance_id])}"' in page
    assert f'title="{reason_sentence("no_fail_to_pass")}"' in page
    assert "Fix number 1" in page

    filtered = html(curator_client.get(url, {"state": "invalid"}, headers=HTMX))
    assert invalid.instance_id in filtered and valid.instance_id not in filtered and "<html" not in filtered
    assert invalid.instance_id in html(curator_client.get(url, {"state": "bogus"}))


def test_task_list_queries_are_bounded(curator_client, repository, django_assert_max_num_queries):
    environment = make_environment(repository)
    for n in range(12):
        task = make_task(repository, n, state=Task.State.VALID)
        make_validation(task, environment, runs=1)
        make_validation(task, environment, runs=1)
    with django_assert_max_num_queries(12):
        response = curator_client.get(reverse("tasks:list", args=[repository.pk]))
    assert response.status_code == 200 and html(response).count("<tr>") == 12 + 1


# --- environments ----------------------------------------------------------------------------


def test_environment_page_shows_the_build_network_and_the_lock(curator_client, task):
    environment = make_environment(task.repository)
    make_validation(task, environment)
    page = html(curator_client.get(reverse("environments:detail", args=[environment.key])))
    text = text_of(page)
    assert ("the package index only, through commitgym's proxy: install scripts could reach nothing else, "
            "neither this machine's services nor the internet") in page.replace("&#x27;", "'")
    assert "attrs==23.2.0\npytest==8.1.1" in page and "Packages 2" in text and "3.11" in text
    assert reverse("tasks:detail", args=[task.instance_id]) in page
    assert reverse("repositories:detail", args=[task.repository.pk]) in page

    # One built before builds went through the proxy says what it could reach.
    older = make_environment(task.repository, key="env-host", network="host")
    assert "install scripts could reach this machine's services" in html(
        curator_client.get(reverse("environments:detail", args=[older.key]))).replace("&#x27;", "'")


def test_environment_list_counts_validations(curator_client, repository, django_assert_max_num_queries):
    for n in range(5):
        environment = make_environment(repository, key=f"env-{n}")
        for m in range(n):
            make_validation(make_task(repository, n * 10 + m), environment, runs=0)
    with django_assert_max_num_queries(10):  # a constant: sessions, roles, the page, its repositories
        page = html(curator_client.get(reverse("environments:list")))
    rows = re.findall(r'<code>(env-\d)</code>.*?<td class="num">(\d+)</td>\s*<td class="nowrap">', page, re.S)
    assert dict(rows) == {f"env-{n}": str(n) for n in range(5)}


# --- the repository and commit pages --------------------------------------------------------


def test_repository_page_shows_the_validation_funnel(curator_client, repository):
    environment = make_environment(repository)
    for n, state in enumerate(["mined", "mined", "environment_failed", "invalid", "valid", "accepted"]):
        task = make_task(repository, n, state=state)
        if state == "environment_failed":
            make_validation(task, None, verdict=state, runs=0)
            Task.objects.filter(pk=task.pk).update(reason="build_requirements_unavailable")
        elif state != "mined":
            validation = make_validation(task, environment, verdict="invalid" if state == "invalid" else "valid",
                                         runs=0)
            Validation.objects.filter(id=validation.id).update(environment_reused=state != "invalid")
    page = html(curator_client.get(reverse("repositories:detail", args=[repository.pk])))
    funnel = re.search(r'<div id="validation-funnel">.*?</table>', page, re.S).group(0)
    rows = [text_of(row) for row in re.findall(r"<tr>.*?</tr>", funnel, re.S)][1:]
    assert rows == [
        "Kept commits (tasks) 6",
        "Environment built 3 −1 2",
        "Validated 3 0",
        "Valid 2 −1 0",
    ]
    assert f'{reverse("tasks:list", args=[repository.pk])}?state=environment_failed' in funnel
    assert f'{reverse("tasks:list", args=[repository.pk])}?state=invalid' in funnel
    assert "Environment reuse: 2 of 3 validations (66.7%) reused an environment; 1 distinct environment." in (
        text_of(page))
    assert f'href="{reverse("tasks:list", args=[repository.pk])}">tasks</a>' in page
    # Why environments failed, by reason, each a link to those tasks.
    assert ("1 without an environment: build_requirements_unavailable What the build needs cannot be resolved, "
            "even with its date cutoff lifted.") in text_of(page)
    assert (f'{reverse("tasks:list", args=[repository.pk])}?state=environment_failed&amp;'
            f'reason=build_requirements_unavailable') in page


def test_environment_page_says_how_it_was_built(curator_client, task):
    environment = make_environment(task.repository)
    Environment.objects.filter(pk=environment.pk).update(
        strategy="python3.9 editable pytest~=6.1.0", pytest="pytest~=6.1.0 (the oldest that runs on Python 3.9)",
        lifted={"setuptools": "2022-10-24", "six": "none"}, generated_files=["src/pkg/_version.py"],
        optional_added=[{"requirement": "wcwidth", "why": "tests skipped: could not import 'wcwidth'"}])
    text = text_of(html(curator_client.get(reverse("environments:detail", args=[environment.key])))).replace(
        "&#x27;", "'")
    assert "Built by python3.9 editable pytest~=6.1.0" in text
    assert "pytest pytest~=6.1.0 (the oldest that runs on Python 3.9)" in text
    assert "Cutoffs lifted setuptools to 2022-10-24, six to none" in text  # by name
    assert "Optional dependencies added wcwidth tests skipped: could not import 'wcwidth'" in text
    assert "Files the install generated src/pkg/_version.py Laid into every run's fresh copy" in text


def test_task_page_says_why_each_attempt_was_refused(curator_client, task):
    validation = make_validation(task, None, verdict="environment_failed", reason="build_failed", runs=0)
    EnvironmentAttempt.objects.create(validation=validation, strategy="python3.11 editable", status="failed",
                                      step="install", reason="build_failed", lifted={"setuptools": "none"},
                                      pytest="pytest>=4.6 (as of the commit)", output="the log")
    text = text_of(html(curator_client.get(reverse("tasks:detail", args=[task.instance_id]))))
    assert ("python3.11 editable failed install build_failed The package itself does not build (its setup script "
            "or build backend fails), with every cutoff of the build's packages tried (on Python 2, with the last "
            "setuptools that runs there).") in text.replace("&#x27;", "'")
    assert "pytest&gt;=4.6 (as of the commit) cutoff lifted: setuptools to none" in text


def test_commit_page_links_its_task(curator_client, small_repository):
    task = Task.objects.filter(repository=small_repository).first()
    page = html(curator_client.get(reverse("repositories:commit", args=[small_repository.pk, task.commit.sha])))
    assert f'href="{reverse("tasks:detail", args=[task.instance_id])}"' in page


def test_admin_pages_open(db, task):
    environment = make_environment(task.repository)
    validation = make_validation(task, environment)
    client = Client()
    client.force_login(User.objects.create_superuser("root", password="pw"))
    for url in [reverse("admin:tasks_validation_changelist"),
                reverse("admin:tasks_validation_change", args=[validation.pk]),
                reverse("admin:environments_environment_changelist"),
                reverse("admin:environments_environment_change", args=[environment.pk])]:
        assert client.get(url).status_code == 200, url


def test_every_test_of_every_run_is_in_the_matrix_with_its_own_group(curator_client, task):
    """The case a curator met: an invalid task whose one failing test failed on both sides showed
    only in the raw output."""
    from apps.tasks.selectors import validation_test_matrix

    validation = validation_make(task, verdict="invalid", reason="no_fail_to_pass", fail_to_pass=[],
                                 pass_to_pass=["t.py::test_ok"])
    for side, outcomes in (("before", {"t.py::test_both": "FAILED", "t.py::test_ok": "PASSED",
                                       "t.py::test_broke": "PASSED"}),
                           ("after", {"t.py::test_both": "ERROR", "t.py::test_ok": "PASSED",
                                      "t.py::test_broke": "FAILED"})):
        TestRunRecord.objects.create(validation=validation, side=side, scope="selected", status="ok",
                                     outcomes=outcomes)
    TestRunRecord.objects.create(validation=validation, side="after", scope="suite", status="ok",
                                 outcomes={"u.py::test_far": "PASSED", "t.py::test_ok": "PASSED"})
    matrix = validation_test_matrix(validation=validation)
    assert {group: [row.test for row in rows] for group, rows in matrix.groups.items() if rows} == {
        "breaks": ["t.py::test_broke"], "fails_both": ["t.py::test_both"], "pass_to_pass": ["t.py::test_ok"],
        "other": ["u.py::test_far"]}
    page = curator_client.get(reverse("tasks:detail", args=[task.instance_id])).content.decode()
    assert "Failing on both sides" in page and "t.py::test_both" in page and "u.py::test_far" in page
