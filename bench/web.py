"""The curation pages under load, against a static file served by the same server in the same run.

Goal (issue: curation pages): with 10,000 tasks and 250,000 test results in PostgreSQL, and 20
users each loading a page every second (20 requests/s, open loop, from a separate process on
loopback), the task list and the review page answer in under 150 ms at the 95th percentile, with
no errors. Also printed: the highest rate at which the 95th percentile stays under 150 ms.

Goal (issue: the judge and the measures): a dataset page of 500 tasks x 26 candidates, each graded
and judged, under 150 ms at the 95th percentile, loaded the same way at the same rate.

Goal (issue: the execution verifier): a task's matrix page of 26 candidates x 100 verifier tests
under 150 ms at the 95th percentile, loaded the same way at the same rate.

Goal (issue: an API): with 10,000 tasks and 260,000 candidates, the API's task list and candidate
list answer in under 150 ms at the 95th percentile at 20 requests/s, and at most 1.5 times the p95 of
the equivalent page (the task list; a run's candidates) loaded the same way in the same run.

Goal (issue: people label patches): with a dataset of 10,000 candidates and 20,000 labels by 50
annotators, the labelling page (each user on the item the queue holds for them) and the dataset's
labels page (agreement, settlements, what the labels say) under 150 ms at the 95th percentile,
loaded the same way at the same rate.

The pages are served by gunicorn with DEBUG off from a database of their own (DATABASE_URL's
server, database `commitgym_webbench`, dropped and made again each run). One of the five
repositories is a real git history, mined, so its review pages render the commit's diff; the
other four hold made-up commits, whose review pages say the mirror is not on disk.

Latency is counted from when a request was due, not when it was sent: a server that falls
behind is charged for the queue. The baseline is a static file (WhiteNoise) loaded at the same
rate from the same server by the same client: what any response costs here.
"""

import json
import math
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from _database import bench_database_url, database_recreate  # noqa: E402
from _report import report  # noqa: E402

DATABASE_NAME = "commitgym_webbench"
TASKS = 10_000
TEST_RESULTS = 250_000  # per-test outcomes across the runs: 2 runs x 12 or 13 tests per task
SEEDED_REPOSITORIES = 4  # plus the mined one
MIRRORED_COMMITS = 1_500  # the mined repository's history; its kept commits become tasks
USERS = 20
DATASET_TASKS, DATASET_CANDIDATES = 500, 26
LABELLED_TASKS, LABELLED_CANDIDATES, LABELS, ANNOTATORS = 400, 25, 20_000, 50  # 10,000 candidates, two labels each
MATRIX_TESTS = 100  # verifier tests of the task whose matrix page is loaded
API_CANDIDATES = 26  # per task, over every task: 260,000 candidates for the API's candidate list
API_TASKS_PAGE = 50  # rows a page: the rows the task list shows
API_CANDIDATES_PAGE = 100  # rows a page: the rows a run's page shows
RATE = 20  # requests per second: 20 users, a page a second each
API_AGAINST_PAGE = 1.5  # the API's p95 at most this many times its page's
MEASURE_SECONDS = 25
STEP_SECONDS = 8
STEP_MIN_REQUESTS = 24  # slow rates take longer steps: a p95 needs requests enough
TARGET_MS = 150.0
REQUEST_TIMEOUT = 10.0  # seconds; a request still unanswered then is an error
LIST_PATHS = ["/tasks/", "/tasks/?state=needs_review", "/tasks/?sort=-leak&flaky=yes", "/tasks/?page=50",
              "/tasks/?state=needs_review&sort=updated&verdict=valid"]
STATIC_PATH = "/static/css/app.css"


def percentile(values: list[float], q: float) -> float:
    """Nearest rank: the smallest value with at least q of them at or below it."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


# --- the load generator: a process of its own, no Django ---------------------------------------


def load_run(spec: dict) -> list[list]:
    """Send spec["requests"] ([kind, path, session key]) at spec["rate"] a second, open loop:
    request i is due at t0 + i/rate whatever happened to the ones before. Returns, per request,
    [kind, milliseconds from due to the whole answer read, status or the error's text]."""
    import http.client
    from concurrent.futures import ThreadPoolExecutor

    host, port, rate = spec["host"], spec["port"], spec["rate"]
    requests = spec["requests"]
    results: list = [None] * len(requests)

    def one(i: int, due: float) -> None:
        kind, path, session = requests[i]
        headers = {"Cookie": f"sessionid={session}"} if session else {}
        try:
            connection = http.client.HTTPConnection(host, port, timeout=REQUEST_TIMEOUT)
            try:
                connection.request("GET", path, headers=headers)
                response = connection.getresponse()
                response.read()
                status = response.status
            finally:
                connection.close()
        except Exception as error:  # noqa: BLE001 - every failure counts as an error
            status = f"{type(error).__name__}: {error}"
        results[i] = [kind, (time.perf_counter() - due) * 1000, status]

    # Threads enough that the client never holds a due request back while the server is slow.
    with ThreadPoolExecutor(max_workers=512) as pool:
        start = time.perf_counter() + 0.1
        for i in range(len(requests)):
            due = start + i / rate
            wait = due - time.perf_counter()
            if wait > 0:
                time.sleep(wait)
            pool.submit(one, i, due)
    return results


def load_main() -> None:
    spec = json.load(sys.stdin)
    json.dump(load_run(spec), sys.stdout)


# --- the bench --------------------------------------------------------------------------------


def mirrored_repository(workdir: Path):
    """A real history, registered and mined as a person would: its tasks' review pages show the diff."""
    from _synthetic_history import history_write

    from apps.jobs.services import job_run
    from apps.repositories.services import mining_job_start, repository_register

    history_write(workdir / "project", MIRRORED_COMMITS)
    repository = repository_register(location=str(workdir / "project"), name="bench/mirrored")
    job, _ = mining_job_start(repository=repository)
    job_run(job_id=job.job_id)
    job.refresh_from_db()
    assert job.state == "succeeded", job.error_message
    assert repository.mirror_dir.is_dir(), repository.mirror_dir
    return repository


STATES = [("needs_review", 0.70), ("accepted", 0.10), ("rejected", 0.06), ("invalid", 0.08), ("valid", 0.06)]
PATHS = {"needs_review": ["mined", "building", "valid", "needs_review"],
         "accepted": ["mined", "building", "valid", "needs_review", "accepted"],
         "rejected": ["mined", "building", "valid", "needs_review", "rejected"],
         "invalid": ["mined", "building", "invalid"],
         "valid": ["mined", "building", "valid"]}
ISSUE_SENTENCES = [
    "Calling the function with a negative value returns the wrong result instead of raising.",
    "The docs say the result is sorted, but it comes back in insertion order.",
    "I expected the cache to be cleared after the reload, but old entries are still returned.",
    "With an empty input the helper crashes with an IndexError rather than returning None.",
    "The separator is kept at the end of the string when the text is cut at max_length.",
    "Steps to reproduce: install the package, run the snippet below, compare with the expected output.",
]


def _plan(index: int, rng: random.Random) -> dict:
    """What one task is: its state, its validation's tests, its issue and review."""
    state = rng.choices([s for s, _ in STATES], [w for _, w in STATES])[0]
    module = f"tests/test_mod{rng.randrange(60):02d}.py"
    tests = [f"{module}::test_case_{index}_{k}" for k in range(12 + index % 2)]
    f2p = [] if state == "invalid" else tests[:rng.randint(1, 3)]
    flaky = [tests[-1]] if rng.random() < 0.1 else []
    plan = {"state": state, "tests": tests, "f2p": f2p, "flaky": flaky,
            "issue": state in ("needs_review", "accepted", "rejected"), "leak": round(rng.random() * 0.6, 3),
            "edited": rng.random() < 0.1, "reviewed": state in ("accepted", "rejected")}
    plan["scores"] = (rng.randint(0, 1), rng.randint(0, 1)) if state == "accepted" else (rng.randint(1, 3), 1)
    return plan


def _task_fields(plan: dict) -> dict:
    reviewed = plan["reviewed"]
    return {"state": plan["state"], "reason": {"invalid": "no_fail_to_pass", "rejected": "tests_too_narrow"}.get(
        plan["state"], ""), "verdict": "invalid" if plan["state"] == "invalid" else "valid",
            "fail_to_pass_count": len(plan["f2p"]), "flaky_count": len(plan["flaky"]),
            "leak_score": plan["leak"] if plan["issue"] else None, "review_count": int(reviewed),
            "underspecified": plan["scores"][0] if reviewed else None,
            "false_negative": plan["scores"][1] if reviewed else None}


def _output(side: str, plan: dict) -> str:
    lines = ["============================= test session starts ==============================",
             "platform linux -- Python 3.11.2, pytest-8.3.3, pluggy-1.5.0", "rootdir: /work", "collected "
             f"{len(plan['tests'])} items", ""]
    for test in plan["tests"]:
        failed = side == "before" and test in plan["f2p"]
        lines.append(f"{test} {'FAILED' if failed else 'PASSED'}")
        if failed:
            lines += ["    def test_case():", ">       assert double(3) == 6", "E       assert 7 == 6", ""]
    return "\n".join(lines) + "\n"


def seed(workdir: Path) -> dict:
    """10,000 tasks across five repositories, each validated once (two runs, 250,000 outcomes in all),
    most waiting for review; and USERS curators, each with a session. Returns what the load needs."""
    from django.contrib.auth.models import Group, User
    from django.contrib.sessions.backends.db import SessionStore
    from django.db import connection
    from django.utils import timezone

    from apps.jobs.models import Job
    from apps.repositories.models import Commit, Repository
    from apps.tasks.models import IssueVersion, Review, Task, TaskStateChange, TestRunRecord, Validation
    from apps.tasks.states import task_instance_id

    rng = random.Random(11)
    started = time.perf_counter()
    curator_group, _ = Group.objects.get_or_create(name="curator")
    users = User.objects.bulk_create([User(username=f"curator{n:02d}", password="!") for n in range(USERS)])
    curator_group.user_set.add(*users)
    sessions = []
    for user in users:
        session = SessionStore()
        session.update({"_auth_user_id": str(user.pk), "_auth_user_hash": user.get_session_auth_hash(),
                        "_auth_user_backend": "django.contrib.auth.backends.ModelBackend"})
        session.create()
        sessions.append(session.session_key)

    mirrored = mirrored_repository(workdir)
    mined_seconds = time.perf_counter() - started
    mirrored_tasks = list(Task.objects.filter(repository=mirrored).select_related("commit", "repository")
                          .order_by("id"))
    assert 0 < len(mirrored_tasks) < TASKS, len(mirrored_tasks)

    now = timezone.now()
    made_up = TASKS - len(mirrored_tasks)
    repositories = [Repository.objects.create(name=f"bench/seeded-{r}", url=f"/nonexistent/seeded-{r}")
                    for r in range(SEEDED_REPOSITORIES)]
    commits = []
    for i in range(made_up):
        repository = repositories[i % SEEDED_REPOSITORIES]
        sha = f"{rng.getrandbits(160):040x}"
        subject = rng.choice(["Fix", "Handle", "Correct", "Avoid"]) + f" {rng.choice(ISSUE_SENTENCES)[:60].lower()}"
        commits.append(Commit(
            repository=repository, sha=sha, parent_sha=f"{rng.getrandbits(160):040x}", author_name="Dev Eloper",
            author_email="dev@example.com", authored_at=now, committed_at=now,
            message=f"{subject}\n\nCloses #{i}. " + " ".join(rng.sample(ISSUE_SENTENCES, 3)),
            source_files=[f"pkg/mod{i % 60:02d}.py"], test_files=[f"tests/test_mod{i % 60:02d}.py"],
            source_file_count=1, test_file_count=1, lines_added=rng.randint(1, 40), lines_deleted=rng.randint(0, 20),
            patch_chars=rng.randint(200, 1900), python_change=True, tests_changed=True))
    Commit.objects.bulk_create(commits, batch_size=2000)

    plans = {}
    new_tasks = []
    for index, commit in enumerate(commits, start=len(mirrored_tasks)):
        plan = plans[index] = _plan(index, rng)
        owner, name = commit.repository.owner_and_name
        new_tasks.append(Task(instance_id=task_instance_id(owner=owner, name=name, sha=commit.sha),
                              repository=commit.repository, commit=commit, **_task_fields(plan)))
    Task.objects.bulk_create(new_tasks, batch_size=2000)
    for index, task in enumerate(mirrored_tasks):
        plans[index] = _plan(index, rng)
        for field, value in _task_fields(plans[index]).items():
            setattr(task, field, value)
    Task.objects.bulk_update(mirrored_tasks, list(_task_fields(plans[0])), batch_size=500)
    tasks = mirrored_tasks + new_tasks

    jobs = Job.objects.bulk_create([
        Job(kind="validation", subject_type="tasks.task", subject_id=task.id, subject_label=task.instance_id,
            state="succeeded", started_at=now, finished_at=now) for task in tasks], batch_size=2000)
    validations = Validation.objects.bulk_create([
        Validation(job=jobs[i], task=task, verdict=task.verdict,
                   reason=task.reason if task.state == "invalid" else "", fail_to_pass=plans[i]["f2p"],
                   pass_to_pass=[t for t in plans[i]["tests"] if t not in plans[i]["f2p"]],
                   flaky=plans[i]["flaky"], seconds=rng.uniform(20, 200))
        for i, task in enumerate(tasks)], batch_size=2000)
    runs = []
    for i, validation in enumerate(validations):
        plan = plans[i]
        for side in ("before", "after"):
            outcomes = {test: "FAILED" if side == "before" and test in plan["f2p"] else "PASSED"
                        for test in plan["tests"]}
            runs.append(TestRunRecord(validation=validation, side=side, scope="selected", index=0, status="ok",
                                      exit_code=1 if side == "before" and plan["f2p"] else 0,
                                      seconds=rng.uniform(1, 30), output=_output(side, plan), outcomes=outcomes))
    TestRunRecord.objects.bulk_create(runs, batch_size=2000)
    del runs

    issues, reviews, changes = [], [], []
    for i, task in enumerate(tasks):
        plan = plans[i]
        text = (f"{task.commit.message.splitlines()[0]}\n\n" + "\n\n".join(rng.sample(ISSUE_SENTENCES, 4)) +
                "\n\n```python\n>>> double(3)\n7\n```\n")
        if plan["issue"]:
            issues.append(IssueVersion(task=task, number=1, text=text, author="model", leak_score=plan["leak"]))
            if plan["edited"]:
                issues.append(IssueVersion(task=task, number=2, text=text + "\nEdited for clarity.\n",
                                           author="person", edited_by=users[i % USERS], leak_score=plan["leak"]))
        if plan["reviewed"]:
            accept = plan["state"] == "accepted"
            reviews.append(Review(task=task, reviewer=users[i % USERS], decision="accept" if accept else "reject",
                                  underspecified=plan["scores"][0], false_negative=plan["scores"][1],
                                  difficulty="15 min - 1 hour", reject_reason="" if accept else "tests_too_narrow"))
        path = PATHS[plan["state"]]
        # The mined repository's tasks have their first change from mining already.
        start = 1 if task.repository_id == mirrored.pk else 0
        for before, after in zip([""] + path, path):
            if after == "mined" and start:
                continue
            changes.append(TaskStateChange(task=task, from_state=before, to_state=after,
                                           reason=task.reason if after == task.state else "",
                                           actor=users[i % USERS] if after in ("accepted", "rejected") else None))
    IssueVersion.objects.bulk_create(issues, batch_size=2000)
    Review.objects.bulk_create(reviews, batch_size=2000)
    TaskStateChange.objects.bulk_create(changes, batch_size=5000)
    with connection.cursor() as cursor:
        # Spread creation and change times over weeks, as a real list has them.
        cursor.execute(f"UPDATE {Task._meta.db_table} SET created_at = now() - id * interval '2 minutes', "
                       f"updated_at = now() - ((id * 7919) % 10000) * interval '1 minute'")
        cursor.execute(f"SELECT count(*) FROM {TestRunRecord._meta.db_table}, jsonb_object_keys(outcomes)")
        outcomes = cursor.fetchone()[0]
    seconds = time.perf_counter() - started
    assert Task.objects.count() == TASKS and outcomes == TEST_RESULTS, (Task.objects.count(), outcomes)

    dataset = judged_dataset_seed(tasks, rng)
    matrix_task = matrix_seed(dataset, rng)
    labelled = labelled_dataset_seed(tasks, users, rng)
    api = api_dataset_seed(tasks, rng)
    with connection.cursor() as cursor:
        # The planner's statistics as autovacuum keeps them on a live database: read after every table is
        # written (statistics of the tables before their bulk inserts plan a 10,000-row join as 55 rows).
        cursor.execute("ANALYZE")
    review_ids = list(Task.objects.filter(state="needs_review").values_list("instance_id", "repository_id"))
    return {
        "dataset_path": f"/datasets/{dataset.pk}/",
        "matrix_path": f"/tasks/{matrix_task.instance_id}/matrix/",
        "labelling_paths": labelled["item_paths"], "agreement_path": labelled["agreement_path"], **api,
        "seconds": seconds, "mined_seconds": mined_seconds, "outcomes": outcomes,
        "runs": TestRunRecord.objects.count(), "mirrored_tasks": len(mirrored_tasks), "sessions": sessions,
        "review_with_diff": [iid for iid, repository_id in review_ids if repository_id == mirrored.pk],
        "review_without_diff": [iid for iid, repository_id in review_ids if repository_id != mirrored.pk],
        "user": users[0],
    }


def api_dataset_seed(tasks: list, rng: random.Random) -> dict:
    """An imported dataset of every task, API_CANDIDATES graded candidates (one per run) on each task that
    has none yet (about 260,000 candidates in all), and the API's lists beside the pages that show the
    same rows."""
    from apps.datasets.models import Candidate, Dataset, DatasetTask, Run

    dataset = Dataset.objects.create(name="bench/api", kind=Dataset.Kind.IMPORT)
    DatasetTask.objects.bulk_create([DatasetTask(dataset=dataset, task=task) for task in tasks], batch_size=5000)
    runs = Run.objects.bulk_create([Run(name=f"bench-api-{r}") for r in range(API_CANDIDATES)])
    # The tasks the other pages measure keep their own candidates only, as those pages were measured.
    measured = set(Candidate.objects.values_list("task_id", flat=True).distinct())
    rest = [task for task in tasks if task.id not in measured]
    for start in range(0, len(rest), 1000):
        Candidate.objects.bulk_create([
            Candidate(task=task, source="import", run=run, kind=run.name, patch=f"diff --git a/x b/x\n# {task.id}\n",
                      outcome="resolved" if rng.random() < 0.3 else "no", outcome_source="graded")
            for task in rest[start:start + 1000] for run in runs], batch_size=5000)
    run = runs[3]
    return {"api_tasks_path": f"/api/v1/tasks/?state=needs_review&page_size={API_TASKS_PAGE}",
            "tasks_page_path": "/tasks/?state=needs_review",
            "api_candidates_path": f"/api/v1/datasets/{dataset.pk}/candidates/?run={run.name}"
                                   f"&page_size={API_CANDIDATES_PAGE}",
            "run_page_path": f"/runs/{run.pk}/", "candidates": Candidate.objects.count()}


def judged_dataset_seed(tasks: list, rng: random.Random):
    """An imported dataset of DATASET_TASKS valid tasks, each with DATASET_CANDIDATES candidates (one
    per run) graded by a report and judged."""
    from apps.datasets.models import Candidate, Dataset, DatasetTask, JudgeScore, Run
    from apps.datasets.verifiers.judging import judge_identity

    model, version = judge_identity()
    chosen = [task for task in tasks if task.verdict == "valid"][:DATASET_TASKS]
    dataset = Dataset.objects.create(name="bench/judged", kind=Dataset.Kind.IMPORT)
    DatasetTask.objects.bulk_create([DatasetTask(dataset=dataset, task=task) for task in chosen])
    runs = Run.objects.bulk_create([Run(name=f"bench-agent-{r}") for r in range(DATASET_CANDIDATES)])
    candidates = []
    for task in chosen:
        share = rng.random()
        candidates += [Candidate(task=task, source="import", run=run, kind=run.name, patch=f"+ change {run.pk}\n",
                                 outcome="resolved" if rng.random() < share else "no", outcome_source="report")
                       for run in runs]
    candidates = Candidate.objects.bulk_create(candidates, batch_size=5000)
    JudgeScore.objects.bulk_create([
        JudgeScore(candidate=c, mode="patch", model=model, prompt_version=version,
                   p_yes=round(min(1.0, max(0.0, rng.gauss(0.6 if c.outcome == "resolved" else 0.4, 0.2))), 3),
                   logprob_yes=-0.5, logprob_no=-1.0) for c in candidates], batch_size=5000)
    return dataset


def labelled_dataset_seed(tasks: list, users: list, rng: random.Random) -> dict:
    """A dataset of LABELLED_TASKS valid tasks (others than the judged dataset's) x LABELLED_CANDIDATES
    graded and judged candidates, each labelled by two of ANNOTATORS annotators over a month (a tenth
    "can't tell", a fifth against the ground truth); each bench user holds an item of its queue."""
    from datetime import timedelta

    from django.contrib.auth.models import Group, User
    from django.db import connection
    from django.utils import timezone

    from apps.datasets.models import Candidate, Dataset, DatasetTask, JudgeScore, Run
    from apps.datasets.verifiers.judging import judge_identity
    from apps.labels.models import Label, LabelHold, LabelSettings
    from apps.labels.services import label_queue_refresh

    model, version = judge_identity()
    valid = [task for task in tasks if task.verdict == "valid"]
    chosen = (valid[DATASET_TASKS:] + valid[:DATASET_TASKS])[:LABELLED_TASKS]
    dataset = Dataset.objects.create(name="bench/labelled", kind=Dataset.Kind.IMPORT)
    DatasetTask.objects.bulk_create([DatasetTask(dataset=dataset, task=task) for task in chosen])
    runs = Run.objects.bulk_create([Run(name=f"bench-labelled-{r}") for r in range(LABELLED_CANDIDATES)])
    candidates = Candidate.objects.bulk_create([
        Candidate(task=task, source="import", run=run, kind=run.name, outcome="resolved" if rng.random() < 0.4 else "no",
                  outcome_source="report",
                  patch=(f"diff --git a/pkg/mod{n}.py b/pkg/mod{n}.py\n--- a/pkg/mod{n}.py\n+++ b/pkg/mod{n}.py\n"
                         f"@@ -1,3 +1,3 @@\n def value():\n-    return None\n+    return {n}\n \n"))
        for task in chosen for n, run in enumerate(runs)], batch_size=5000)
    JudgeScore.objects.bulk_create([
        JudgeScore(candidate=c, mode="patch", model=model, prompt_version=version, p_yes=round(rng.random(), 3),
                   logprob_yes=-0.5, logprob_no=-1.0) for c in candidates], batch_size=5000)
    annotators = User.objects.bulk_create([User(username=f"annotator{n:02d}", password="!")
                                           for n in range(ANNOTATORS)])
    Group.objects.get_or_create(name="annotator")[0].user_set.add(*annotators)
    LabelSettings.objects.create(dataset=dataset, overlap=2)
    now = timezone.now()
    labels = []
    for candidate in candidates:
        for annotator in rng.sample(annotators, 2):
            roll = rng.random()
            right = "correct" if candidate.outcome == "resolved" else "incorrect"
            verdict = "cant_tell" if roll < 0.1 else right if roll < 0.8 else {"correct": "incorrect",
                                                                              "incorrect": "correct"}[right]
            labels.append(Label(candidate=candidate, annotator=annotator, dataset=dataset, verdict=verdict,
                                confidence=rng.randint(1, 3), rationale="wrong" if verdict == "incorrect" else "",
                                seconds=rng.uniform(20, 400), order="random"))
    Label.objects.bulk_create(labels[:LABELS], batch_size=5000)
    with connection.cursor() as cursor:  # a month of labelling
        cursor.execute(f"UPDATE {Label._meta.db_table} SET created_at = now() - (id %% 30) * interval '1 day' "
                       f"WHERE dataset_id = %s", [dataset.pk])
    label_queue_refresh(dataset, force=True)
    # Each bench user has an item held for them: the one the queue would hand them.
    held = Candidate.objects.filter(task__in=chosen).order_by("id")[:len(users)]
    LabelHold.objects.bulk_create([LabelHold(dataset=dataset, candidate=candidate, annotator=user, taken_at=now,
                                             expires_at=now + timedelta(days=1)) for candidate, user in zip(held, users)])
    return {"item_paths": [f"/datasets/{dataset.pk}/label/{candidate.pk}/" for candidate in held],
            "agreement_path": f"/datasets/{dataset.pk}/labels/"}


def matrix_seed(dataset, rng: random.Random):
    """The dataset's first task with MATRIX_TESTS verifier tests, each of its candidates run against them."""
    from apps.datasets.models import Candidate, Execution, ReproductionTests, VerifierTest, VerifierTestSet
    from apps.jobs.models import Job
    from apps.jobs.services import job_start

    def succeeded(kind, subject):
        job, _ = job_start(kind=kind, subject=subject)
        Job.objects.filter(id=job.id).update(state=Job.State.SUCCEEDED)
        return job

    task = dataset.tasks.order_by("instance_id").first()
    reproduction = ReproductionTests.objects.create(job=succeeded("reproduce", task), task=task)
    test_set = VerifierTestSet.objects.create(job=succeeded("verifier_tests", task), task=task,
                                              reproduction=reproduction)
    tests = VerifierTest.objects.bulk_create([
        VerifierTest(test_set=test_set, test_id=f"tests/test_module_{i // 10}.py::test_case_{i}", position=i,
                     kind="reproduction" if i < 10 else "regression", passes_on_base=i >= 10)
        for i in range(MATRIX_TESTS)])
    output = "\n".join(f"{'_' * 20} test_case_{i} {'_' * 20}\nE   assert {i} == {i + 1}"
                       for i in range(0, MATRIX_TESTS, 3))
    for candidate in Candidate.objects.filter(task=task):
        passing = rng.random()
        Execution.objects.create(job=succeeded("execute", candidate), candidate=candidate, test_set=test_set,
                                 outcome="no", output=output, outcomes={
                                     t.test_id: "PASSED" if rng.random() < passing else "FAILED" for t in tests})
    return task


def page_queries(seeded: dict) -> None:
    """Queries each page makes and its time in this process with no load: where the time goes."""
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    client = Client()
    client.force_login(seeded["user"])
    pages = [("list", LIST_PATHS[0]), ("list_page_50", "/tasks/?page=50"),
             ("review", f"/tasks/{seeded['review_with_diff'][0]}/review/"),
             ("review_without_diff", f"/tasks/{seeded['review_without_diff'][0]}/review/"),
             ("dataset", seeded["dataset_path"]), ("matrix", seeded["matrix_path"]),
             ("labelling", seeded["labelling_paths"][0]), ("agreement", seeded["agreement_path"]),
             ("api_tasks", seeded["api_tasks_path"]), ("run_page", seeded["run_page_path"]),
             ("api_candidates", seeded["api_candidates_path"])]
    for name, path in pages:
        started = time.perf_counter()
        client.get(path)  # templates and caches warm
        if name == "agreement":  # what the figures cost when computed, as they are after a settlement
            print(f"web.page.agreement_cold: {(time.perf_counter() - started) * 1000:.1f} ms unloaded in-process, "
                  f"the figures of {LABELS} labels computed", flush=True)
        with CaptureQueriesContext(connection) as queries:
            started = time.perf_counter()
            response = client.get(path)
            seconds = time.perf_counter() - started
        assert response.status_code == 200, (path, response.status_code)
        content = response.content.decode()
        if name == "review":
            assert "not on disk" not in content and "could not" not in content, "the review page shows no diff"
        if name == "dataset":
            assert content.count('<svg class="chart"') == 2, "the dataset page draws no chart"
        if name == "labelling":
            assert 'id="label-form"' in content and "bench-labelled" not in content, "no label form, or not blind"
        if name == "agreement":
            assert 'id="fleiss-row"' in content and 'id="error-rates"' in content, "the labels page lacks figures"
        if name == "matrix":
            cells = content.count('class="cell cell-')
            assert cells == DATASET_CANDIDATES * MATRIX_TESTS, f"the matrix page shows {cells} cells"
        print(f"web.page.{name}: {len(queries.captured_queries)} queries, {seconds * 1000:.1f} ms unloaded "
              f"in-process, {len(content) / 1000:.0f} kB", flush=True)


def server_start(workdir: Path, database_url: str) -> tuple[subprocess.Popen, int, str]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    cpus = len(os.sched_getaffinity(0))
    # A process per CPU (at least two), threads to overlap database waits; BENCH_WEB_WORKERS and
    # BENCH_WEB_THREADS try other shapes.
    workers = int(os.environ.get("BENCH_WEB_WORKERS", max(2, cpus)))
    threads = int(os.environ.get("BENCH_WEB_THREADS", 4))
    env = {**os.environ, "DATABASE_URL": database_url, "DEBUG": "0", "ALLOWED_HOSTS": "127.0.0.1,localhost",
           "LOG_LEVEL": "WARNING", "DJANGO_SETTINGS_MODULE": "apps.settings"}
    log = open(workdir / "gunicorn.log", "wb")
    server = subprocess.Popen(
        [str(Path(sys.executable).parent / "gunicorn"), "apps.wsgi:application", "--bind", f"127.0.0.1:{port}",
         "--workers", str(workers), "--threads", str(threads), "--worker-class", "gthread", "--chdir", str(ROOT),
         "--timeout", "60", "--graceful-timeout", "5", "--log-level", "warning"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{STATIC_PATH}", timeout=2) as response:
                if response.status == 200:
                    break
        except OSError:
            pass
        if server.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"gunicorn did not answer:\n{(workdir / 'gunicorn.log').read_text()[-3000:]}")
        time.sleep(0.2)
    return server, port, f"{workers} workers x {threads} threads on {cpus} CPUs"


class Load:
    """Builds request schedules and runs them in a separate process."""

    def __init__(self, port: int, seeded: dict, seed: int = 5):
        self.port, self.seeded, self.rng = port, seeded, random.Random(seed)

    def pages(self, count: int) -> list[list]:
        """User i % USERS loads request i: half task lists (filters in turn), half review pages of
        tasks waiting for review, three in four of them with the diff (the mined repository)."""
        requests = []
        for i in range(count):
            session = self.seeded["sessions"][i % USERS]
            if i % 2 == 0:
                requests.append(["list", LIST_PATHS[(i // 2) % len(LIST_PATHS)], session])
            elif self.rng.random() < 0.75:
                requests.append(["review", f"/tasks/{self.rng.choice(self.seeded['review_with_diff'])}/review/",
                                 session])
            else:
                requests.append(["review_without_diff",
                                 f"/tasks/{self.rng.choice(self.seeded['review_without_diff'])}/review/", session])
        return requests

    def run(self, rate: float, requests: list[list]) -> dict[str, dict]:
        spec = {"host": "127.0.0.1", "port": self.port, "rate": rate, "requests": requests}
        done = subprocess.run([sys.executable, __file__, "--load"], input=json.dumps(spec), capture_output=True,
                              text=True)
        if done.returncode:
            raise RuntimeError(f"the load generator failed:\n{done.stderr[-3000:]}")
        by_kind: dict[str, dict] = {}
        for kind, ms, status in json.loads(done.stdout):
            for key in (kind, "pages" if kind != "static" else None):
                if key is None:
                    continue
                entry = by_kind.setdefault(key, {"ms": [], "errors": [], "count": 0})
                entry["count"] += 1
                entry["ms"].append(ms)
                if status != 200:
                    entry["errors"].append(status)
        self.idle_wait()
        return by_kind

    def idle_wait(self, limit: float = 120.0) -> None:
        """The server keeps working through requests whose client gave up: wait until a static file
        answers at once again, so that the next step starts on an idle server."""
        deadline, quick = time.monotonic() + limit, 0
        while quick < 3 and time.monotonic() < deadline:
            started = time.perf_counter()
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{STATIC_PATH}", timeout=limit) as response:
                    response.read()
            except OSError:
                pass
            quick = quick + 1 if time.perf_counter() - started < 0.05 else 0
            time.sleep(0.2)


def step_summary(by_kind: dict) -> tuple[float, float, int, int, str]:
    """p50 and p95 of all pages, errors, requests, and each kind's p95 in words."""
    entry = by_kind["pages"]
    kinds = ", ".join(f"{kind} {percentile(by_kind[kind]['ms'], 0.95):.0f}"
                      for kind in ("list", "review", "review_without_diff") if kind in by_kind)
    return (percentile(entry["ms"], 0.5), percentile(entry["ms"], 0.95), len(entry["errors"]), entry["count"],
            kinds)


def ramp(load: Load, first: tuple) -> None:
    """From the measurement at RATE (`first`): double the rate while the pages' p95 stays under the
    target with no errors, or halve it until it does; then split the gap between the highest rate
    under and the lowest over, three times. Each step lasts STEP_SECONDS."""

    def verdict(rate: int, summary: tuple) -> bool:
        p50, p95, errors, count, kinds = summary
        ok = p95 < TARGET_MS and errors == 0
        print(f"web.ramp.{rate}_per_s: p95 {p95:.1f} ms (by page: {kinds} ms), p50 {p50:.1f} ms, {errors} errors "
              f"of {count} requests ({'under' if ok else 'OVER'} {TARGET_MS:.0f} ms"
              f"{'' if errors == 0 else ' or errors'})", flush=True)
        return ok

    def step(rate: int) -> bool:
        requests = load.pages(max(STEP_MIN_REQUESTS, int(rate * STEP_SECONDS)))
        return verdict(rate, step_summary(load.run(rate, requests)))

    good, bad = 0, None
    if verdict(RATE, first):
        good, rate = RATE, RATE * 2
        while bad is None and rate <= 1280:
            if step(rate):
                good, rate = rate, rate * 2
            else:
                bad = rate
    else:
        bad, rate = RATE, RATE // 2
        while not good and rate >= 1:
            if step(rate):
                good = rate
            else:
                bad, rate = rate, rate // 2
    for _ in range(3):
        if bad is None or bad - good <= 1 or not good:
            break
        middle = (good + bad) // 2
        if step(middle):
            good = middle
        else:
            bad = middle
    over = f"{bad} requests/s" if bad is not None else "none up to 1280 requests/s"
    print(f"web.highest_rate_p95_under_{TARGET_MS:.0f}ms: {good if good else 'below 1'} requests/s "
          f"(the lowest rate tried over it: {over}; goal: at least {RATE})", flush=True)


def measure(load: Load) -> tuple:
    """The static file, then the pages, at RATE for MEASURE_SECONDS each. Returns the pages' summary."""
    count = RATE * MEASURE_SECONDS
    static = load.run(RATE, [["static", STATIC_PATH, ""]] * count)["static"]
    assert not static["errors"], static["errors"][:5]
    pages = load.run(RATE, load.pages(count))
    static_p50, static_p95 = percentile(static["ms"], 0.5), percentile(static["ms"], 0.95)
    met = True
    for kind in ("list", "review", "review_without_diff"):
        entry = pages[kind]
        p50, p95 = percentile(entry["ms"], 0.5), percentile(entry["ms"], 0.95)
        report(f"web.{kind}_p50_{RATE}_per_s", p50, "ms", static_p50, "ms (static file p50)")
        report(f"web.{kind}_p95_{RATE}_per_s", p95, "ms", static_p95, "ms (static file p95)")
        report(f"web.{kind}_p95_{RATE}_per_s.target", p95, "ms", TARGET_MS, "ms (target)")
        met = met and p95 < TARGET_MS
    errors = pages["pages"]["errors"]
    print(f"web.errors_{RATE}_per_s: {len(errors)} of {pages['pages']['count']} requests"
          + (f" (first: {errors[:3]})" if errors else ""), flush=True)
    met = met and not errors
    print(f"web.goal: list and review p95 under {TARGET_MS:.0f} ms at {RATE} requests/s with no errors: "
          f"{'met' if met else 'NOT met'}", flush=True)
    for name, path, label in (("dataset", "dataset_path", f"dataset_{DATASET_TASKS}x{DATASET_CANDIDATES}"),
                              ("matrix", "matrix_path", f"matrix_{DATASET_CANDIDATES}x{MATRIX_TESTS}")):
        one_page_goal(load, name, load.seeded[path], f"web.{label}", count, static_p50, static_p95)
    labels = f"{LABELLED_TASKS * LABELLED_CANDIDATES}_candidates_{LABELS}_labels"
    one_page_goal(load, "labelling", load.seeded["labelling_paths"], f"web.labelling_{labels}", count, static_p50,
                  static_p95)
    one_page_goal(load, "agreement", load.seeded["agreement_path"], f"web.agreement_{labels}", count, static_p50,
                  static_p95)
    print(f"web.seed.candidates: {load.seeded['candidates']} in all", flush=True)
    for api, page, label in (("api_tasks", "tasks_page", f"tasks_{TASKS}"),
                             ("api_candidates", "run_page", f"{TASKS}_tasks_candidates")):
        page_p95 = one_page_goal(load, page, load.seeded[f"{page}_path"], f"web.{page}_{label}", count, static_p50,
                                 static_p95)
        api_p95 = one_page_goal(load, api, load.seeded[f"{api}_path"], f"web.{api}_{label}", count, static_p50,
                                static_p95)
        report(f"web.{api}_{label}_p95_against_its_page", api_p95, "ms", page_p95, "ms (the page's p95)")
        print(f"web.goal: the {api} p95 at most {API_AGAINST_PAGE} times its page's: "
              f"{'met' if api_p95 <= API_AGAINST_PAGE * page_p95 else 'NOT met'}", flush=True)
    return step_summary(pages)


def one_page_goal(load: "Load", name: str, path, label: str, count: int, static_p50: float,
                  static_p95: float) -> float:
    """One page alone at RATE, against the static file's figures and the target. `path` is one page,
    or a page per user (user i loads path[i])."""
    paths = path if isinstance(path, list) else [path] * USERS
    entry = load.run(RATE, [[name, paths[i % USERS], load.seeded["sessions"][i % USERS]] for i in range(count)])[name]
    p50, p95 = percentile(entry["ms"], 0.5), percentile(entry["ms"], 0.95)
    report(f"{label}_p50_{RATE}_per_s", p50, "ms", static_p50, "ms (static file p50)")
    report(f"{label}_p95_{RATE}_per_s", p95, "ms", static_p95, "ms (static file p95)")
    report(f"{label}_p95_{RATE}_per_s.target", p95, "ms", TARGET_MS, "ms (target)")
    print(f"web.goal: the {name} page p95 under {TARGET_MS:.0f} ms at {RATE} requests/s with no errors: "
          f"{'met' if p95 < TARGET_MS and not entry['errors'] else 'NOT met'} ({len(entry['errors'])} errors)",
          flush=True)
    return p95


def main(pages_only: bool = False) -> None:
    """The whole bench; with `pages_only`, the seed and each page's queries and in-process time, without
    the server and the load (a quick loop while making the pages faster)."""
    workdir = Path(tempfile.mkdtemp(prefix="commitgym-bench-web-"))
    database_url = bench_database_url(DATABASE_NAME)
    os.environ["DATABASE_URL"] = database_url
    os.environ["COMMITGYM_VAR_DIR"] = str(workdir / "var")
    os.environ["CELERY_BROKER_URL"] = "filesystem://"  # the mining job's message goes nowhere: it runs here
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "apps.settings")
    server = None
    database_recreate(database_url)
    try:
        import django

        django.setup()
        from django.core.management import call_command
        from django.db import connections

        call_command("migrate", verbosity=0)
        seeded = seed(workdir)
        waiting = len(seeded["review_with_diff"]) + len(seeded["review_without_diff"])
        print(f"web.seed.tasks: {TASKS} tasks ({SEEDED_REPOSITORIES + 1} repositories; {seeded['mirrored_tasks']} "
              f"of a mined history with its mirror; {waiting} waiting for review)", flush=True)
        print(f"web.seed.test_results: {seeded['outcomes']} outcomes ({seeded['runs']} test runs)", flush=True)
        print(f"web.seed.seconds: {seeded['seconds']:.1f} s ({seeded['mined_seconds']:.1f} s of it writing and mining "
              f"the {MIRRORED_COMMITS}-commit history)", flush=True)
        page_queries(seeded)
        if pages_only:
            return
        connections.close_all()
        server, port, shape = server_start(workdir, database_url)
        print(f"web.server: gunicorn, {shape}, DEBUG off (load average {os.getloadavg()[0]:.1f}: the machine "
              f"is shared, other work there slows the pages)", flush=True)
        load = Load(port, seeded)
        load.run(10, load.pages(40))  # warm up: connections, templates
        # Each server process computes the labels page's figures once (as after a settlement), then serves them.
        load.run(4, [["agreement", seeded["agreement_path"], seeded["sessions"][i % USERS]] for i in range(12)])
        ramp(load, measure(load))
    finally:
        if server is not None:
            server.terminate()
            try:
                server.wait(timeout=15)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
        try:
            from django.db import connections

            connections.close_all()
        except Exception:  # noqa: BLE001 - Django may not have started
            pass
        database_recreate(database_url, create=False)
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    if sys.argv[1:] == ["--load"]:
        load_main()
    else:
        main(pages_only=sys.argv[1:] == ["--pages-only"])
