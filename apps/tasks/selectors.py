"""Reads for tasks and their validations."""

import difflib
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Optional

from django.conf import settings
from django.core.cache import cache
from django.db.models import Count, OuterRef, Prefetch, Q, QuerySet, Subquery
from django.urls import reverse
from django.utils import timezone

from apps.llm.models import LanguageJob, ModelCall
from apps.repositories.models import Repository
from apps.repositories.selectors import repositories_visible
from worker.engine.git.patches import CommitPatches, commit_patches
from worker.engine.reasons import reason_sentence
from worker.engine.validate.generated_tests import FILE_PREFIX as GENERATED_FILE_PREFIX

from .models import (
    GeneratedTest,
    ImportedInstance,
    IssueVersion,
    Review,
    Task,
    TestRunRecord,
    Validation,
)
from .states import VALID_OR_LATER

SORTS = {
    "-updated": ("-updated_at", "-id"),
    "updated": ("updated_at", "id"),
    "-created": ("-created_at", "-id"),
    "-f2p": ("-fail_to_pass_count", "-id"),
    "f2p": ("fail_to_pass_count", "id"),
    "-leak": ("-leak_score", "-id"),
    "-underspecified": ("-underspecified", "-id"),
    "-false_negative": ("-false_negative", "-id"),
    "id": ("instance_id",),
}


def tasks_visible(*, user) -> QuerySet:
    """Tasks of the repositories the user may see. The repositories' ids are read first: a plain list
    lets PostgreSQL walk the tasks' indexes instead of joining the group rules into every query."""
    return Task.objects.filter(repository_id__in=[repository.pk for repository in repositories_named(user=user)])


def repositories_named(*, user) -> list[Repository]:
    """The repositories the user may see (id and name only), by name; read once per request (the
    user object keeps them, like its roles)."""
    if not hasattr(user, "_commitgym_visible_repositories"):
        user._commitgym_visible_repositories = list(
            repositories_visible(user=user).only("id", "name").order_by("name"))
    return user._commitgym_visible_repositories


def task_for_page(*, user, instance_id: str) -> Task:
    """The task with its commit and repository; Task.DoesNotExist when absent or not visible."""
    return tasks_visible(user=user).select_related("commit", "repository").get(instance_id=instance_id)


# --- the task list ------------------------------------------------------------------------


def _latest_validation_prefetch() -> Prefetch:
    """Each task's latest validation, as `latest_validations` (a list of at most one)."""
    latest = (Validation.objects.select_related("environment")
              .defer("pass_to_pass", "flaky", "breaks", "error", "environment__lock")
              .order_by("-created_at", "-id")[:1])
    return Prefetch("validations", queryset=latest, to_attr="latest_validations")


def tasks_filtered(*, user, sort: str = "-updated", **filters) -> QuerySet:
    """Visible tasks matching the list's filters (TaskFilterForm's names), in the chosen order.
    Without `state`: see task_state_counts for the counts each state would give."""
    tasks = _tasks_matching(tasks_visible(user=user), filters)
    if filters.get("state"):
        tasks = tasks.filter(state=filters["state"])
    return tasks.order_by(*SORTS.get(sort, SORTS["-updated"]))


def _tasks_matching(tasks: QuerySet, filters: dict) -> QuerySet:
    if filters.get("repository"):
        tasks = tasks.filter(repository_id=filters["repository"])
    if filters.get("q"):
        text = filters["q"].strip()
        tasks = tasks.filter(Q(instance_id__icontains=text) | Q(commit__message__icontains=text))
    if filters.get("verdict"):
        tasks = tasks.filter(verdict="" if filters["verdict"] == "none" else filters["verdict"])
    if filters.get("reason"):
        tasks = tasks.filter(reason=filters["reason"])
    if filters.get("flaky"):
        tasks = tasks.filter(flaky_count__gt=0) if filters["flaky"] == "yes" else tasks.filter(flaky_count=0)
    if filters.get("leak") == "flagged":
        tasks = tasks.filter(leak_score__gt=settings.COMMITGYM_LEAK_THRESHOLD)
    elif filters.get("leak") == "clear":
        tasks = tasks.filter(leak_score__lte=settings.COMMITGYM_LEAK_THRESHOLD)
    if filters.get("f2p_min") is not None:
        tasks = tasks.filter(fail_to_pass_count__gte=filters["f2p_min"])
    if filters.get("f2p_max") is not None:
        tasks = tasks.filter(fail_to_pass_count__lte=filters["f2p_max"])
    if filters.get("generated"):
        tasks = tasks.filter(has_generated_tests=filters["generated"] == "yes")
    if filters.get("reviewer"):
        tasks = tasks.filter(id__in=Review.objects.filter(reviewer_id=filters["reviewer"]).values("task_id"))
    if filters.get("underspecified_min") is not None:
        tasks = tasks.filter(underspecified__gte=filters["underspecified_min"])
    if filters.get("false_negative_min") is not None:
        tasks = tasks.filter(false_negative__gte=filters["false_negative_min"])
    if filters.get("mutation_max") is not None:
        tasks = tasks.filter(mutation_score__lte=filters["mutation_max"])
    if filters.get("disagree"):
        tasks = tasks.filter(disagree=filters["disagree"] == "yes")
    return tasks


def task_state_counts(*, user, **filters) -> dict[str, int]:
    """How many tasks each state holds under the other filters (one query)."""
    filters.pop("state", None)
    filters.pop("sort", None)
    rows = _tasks_matching(tasks_visible(user=user), filters).order_by().values("state").annotate(n=Count("id"))
    return {row["state"]: row["n"] for row in rows}


def task_reasons_used() -> list[str]:
    """Reason codes tasks carry, for the list's filter; read at most once a minute (a scan of every task)."""
    return cache.get_or_set("tasks:reasons_used", lambda: sorted(
        Task.objects.exclude(reason="").order_by().values_list("reason", flat=True).distinct()), 60)


@dataclass
class TaskRow:
    """What a row of the task list shows: plain values, much cheaper to load than model instances."""

    id: int
    instance_id: str
    state: str
    reason: str
    verdict: str
    fail_to_pass_count: int
    flaky_count: int
    has_generated_tests: bool
    leak_score: float | None
    review_count: int
    underspecified: int | None
    false_negative: int | None
    disagree: bool
    updated_at: object
    message: str
    repository_name: str
    hold_expires_at: object
    hold_username: str | None
    review_url: str = ""
    held_by: str = ""

    @property
    def subject(self) -> str:
        return self.message.split("\n", 1)[0]


_ROW_FIELDS = ("id", "instance_id", "state", "reason", "verdict", "fail_to_pass_count", "flaky_count",
               "has_generated_tests", "leak_score", "review_count", "underspecified", "false_negative", "disagree",
               "updated_at", "commit__message", "repository__name", "hold__expires_at", "hold__user__username")


def tasks_page_rows(tasks) -> list[TaskRow]:
    """One page of the list, with what its rows show (two queries whatever the page's size): the
    page's ids first, so a deep page does not join every row before it."""
    ids = list(tasks.values_list("id", flat=True))
    by_id = {values[0]: TaskRow(*values) for values in Task.objects.filter(id__in=ids).values_list(*_ROW_FIELDS)}
    now = timezone.now()
    url = reverse("tasks:review", args=["TASK"])  # one reverse for the page: only the id differs
    for row in by_id.values():
        row.review_url = url.replace("TASK", row.instance_id)
        row.held_by = row.hold_username if row.hold_expires_at and row.hold_expires_at > now else ""
    return [by_id[task_id] for task_id in ids if task_id in by_id]


# --- the validation funnel of a repository ----------------------------------------------------


@dataclass(frozen=True)
class ValidationStep:
    label: str
    remaining: int
    dropped: int
    waiting: int  # reached the step before, neither through nor dropped yet (queued, running, never validated)
    state: str  # the task state the dropped tasks are in; "" when nothing drops here


def repository_validation_funnel(*, repository: Repository) -> list[ValidationStep]:
    """Kept commits (tasks) → environment built → validated → valid, in one query."""
    latest = Validation.objects.filter(task=OuterRef("pk")).order_by("-created_at", "-id")
    counts = (
        Task.objects.filter(repository=repository)
        .annotate(latest_environment=Subquery(latest.values("environment_id")[:1]),
                  latest_state=Subquery(latest.values("job__state")[:1]))
        .aggregate(
            tasks=Count("id"),
            built=Count("id", filter=Q(latest_environment__isnull=False)),
            environment_failed=Count("id", filter=Q(state=Task.State.ENVIRONMENT_FAILED)),
            validated=Count("id", filter=Q(latest_environment__isnull=False, latest_state=Validation.State.SUCCEEDED)),
            valid=Count("id", filter=Q(state__in=VALID_OR_LATER)),
            invalid=Count("id", filter=Q(state=Task.State.INVALID)),
        )
    )
    rows = [
        ("Kept commits (tasks)", counts["tasks"], 0, ""),
        ("Environment built", counts["built"], counts["environment_failed"], Task.State.ENVIRONMENT_FAILED),
        ("Validated", counts["validated"], 0, ""),
        ("Valid", counts["valid"], counts["invalid"], Task.State.INVALID),
    ]
    steps, before = [], counts["tasks"]
    for label, remaining, dropped, state in rows:
        steps.append(ValidationStep(label, remaining, dropped, max(before - remaining - dropped, 0), state))
        before = remaining
    return steps


def repository_environment_failures(*, repository: Repository) -> list[tuple[str, str, int]]:
    """(reason, sentence, tasks) for the repository's tasks whose environment failed, most first."""
    counts = (Task.objects.filter(repository=repository, state=Task.State.ENVIRONMENT_FAILED)
              .values("reason").annotate(tasks=Count("id")).order_by("-tasks", "reason"))
    return [(row["reason"], reason_sentence(row["reason"]) if row["reason"] else "", row["tasks"]) for row in counts]


# --- the task page ----------------------------------------------------------------------------


def task_patches(*, task: Task) -> CommitPatches:
    """The task's source (gold) and test patches: an imported instance's as given, a mined task's
    from its commit in the mirror (GitError when the mirror cannot give them)."""
    if task.imported:
        instance = task.imported_instance
        return CommitPatches(source_patch=instance.patch, test_patch=instance.test_patch, test_files=[])
    repository, commit = task.repository, task.commit
    return _commit_patches(repository.mirror_dir, commit.sha, commit.parent_sha, repository.test_file_rules())


@lru_cache(maxsize=256)
def _commit_patches(mirror_dir, sha: str, parent_sha: str, rules) -> CommitPatches:
    """A commit's patches never change for the same rules: a worker grading many candidates of a
    task reads them once."""
    return commit_patches(mirror_dir, sha, parent_sha, rules)


def task_base_sha(task: Task) -> str:
    """The commit a candidate patch applies to: a mined task's parent, an imported instance's base."""
    return task.commit.sha if task.imported else task.commit.parent_sha


def task_imported_instance(*, task: Task) -> Optional[ImportedInstance]:
    """What the instance file gave an imported task; None for a mined one."""
    return ImportedInstance.objects.filter(task=task).first() if task.imported else None


def task_validations(*, task: Task) -> list[Validation]:
    """The task's validations, newest first: the latest whole, earlier ones without their test lists."""
    validations = list(Validation.objects.filter(task=task).select_related("job").order_by("-created_at", "-id")
                       .only("id", "task_id", "job_id", "verdict", "reason", "created_at", "seconds", "job__state",
                             "job__error_code", "job__started_at", "job__finished_at"))
    if not validations:
        return []
    latest = (Validation.objects.select_related("environment", "job").defer("environment__lock")
              .prefetch_related("attempts", Prefetch("runs", queryset=TestRunRecord.objects.order_by("id")))
              .get(pk=validations[0].pk))
    return [latest, *validations[1:]]


@dataclass
class RunColumn:
    run: TestRunRecord
    label: str


@dataclass
class TestRow:
    __test__ = False  # not a pytest test class

    test: str
    group: str  # fail_to_pass | flaky | breaks | pass_to_pass | other
    flaky: bool
    cells: list[str] = field(default_factory=list)  # the outcome in each run, "" when the run has none

    @property
    def generated(self) -> bool:
        """A test the test writer wrote (generated files are put at the root under this name)."""
        return self.test.startswith(f"{GENERATED_FILE_PREFIX}_")


@dataclass
class TestMatrix:
    columns: list[RunColumn]
    groups: dict[str, list[TestRow]]  # in display order


_SIDE_ORDER = {"before": 0, "after": 1, "gold": 2, "empty": 3}
_SCOPE_ORDER = {"selected": 0, "suite": 1, "rerun": 2, "breaks": 3, "graded": 4}  # breaks, graded: older validations


def _run_label(run: TestRunRecord) -> str:
    if run.scope == "selected":
        return f"{run.side} #{run.index + 1}"
    if run.scope == "suite":
        return f"suite {run.side}"
    if run.scope == "rerun":
        return f"rerun {run.side} #{run.index + 1}"
    if run.scope == "breaks":
        return f"recheck {run.side} #{run.index + 1}"
    return f"{run.side} patch" if run.scope == "graded" else f"{run.scope} {run.side}"


_PASSING = {"PASSED", "XFAIL"}
_FAILING = {"FAILED", "ERROR"}


def _passes(status: str) -> bool:
    return status in _PASSING


def _outcomes_by_side(runs, side: str) -> dict[str, list[str]]:
    """{test: its outcome in each run of the side that ran it}."""
    found: dict[str, list[str]] = {}
    for run in runs:
        if run.side == side:
            for test, status in run.outcomes.items():
                found.setdefault(test, []).append(status)
    return found


def validation_test_matrix(*, validation: Validation) -> TestMatrix:
    """Every test of every run × the runs, in groups: F2P, flaky, broken by the fix, failing on both
    sides, P2P, then every other test a run reported."""
    runs = sorted(validation.runs.all(),
                  key=lambda r: (_SCOPE_ORDER.get(r.scope, 9), _SIDE_ORDER.get(r.side, 9), r.index, r.id))
    columns = [RunColumn(run, _run_label(run)) for run in runs]
    flaky = set(validation.flaky)
    groups: dict[str, list[TestRow]] = {}
    seen: set[str] = set()

    def add(group: str, tests) -> None:
        rows = []
        for test in tests:
            if test in seen:
                continue
            seen.add(test)
            rows.append(TestRow(test, group, test in flaky, [run.outcomes.get(test, "") for run in runs]))
        groups[group] = rows

    before, after = _outcomes_by_side(runs, "before"), _outcomes_by_side(runs, "after")
    add("fail_to_pass", validation.fail_to_pass)
    add("flaky", validation.flaky)
    # What the fix broke: the validation's list, and any test that passed before and fails after.
    add("breaks", [*validation.breaks, *sorted(test for test in after if all(map(_passes, before.get(test, [""])))
                                               and any(status in _FAILING for status in after[test]))])
    # Failing on both sides: a test the fix does not repair, which is in no list of the oracle.
    add("fails_both", sorted(test for test in set(before) & set(after)
                             if not any(map(_passes, before[test])) and not any(map(_passes, after[test]))
                             and any(status in _FAILING for status in before[test] + after[test])))
    add("pass_to_pass", validation.pass_to_pass)
    add("other", sorted({test for run in runs for test in run.outcomes}))
    return TestMatrix(columns, groups)


# --- the task's issue -----------------------------------------------------------------------------


@dataclass
class IssueVersionRow:
    version: "IssueVersion"
    diff: str  # a unified diff against the version before ("" for the first)


def task_issue_versions(*, task: Task) -> list[IssueVersionRow]:
    """Every version of the task's issue, newest first, each with its diff to the one before."""
    versions = list(IssueVersion.objects.filter(task=task).select_related("model_call", "edited_by")
                    .order_by("number"))
    rows, before = [], None
    for version in versions:
        diff = "" if before is None else "".join(difflib.unified_diff(
            before.text.splitlines(keepends=True), version.text.splitlines(keepends=True),
            fromfile=f"version {before.number}", tofile=f"version {version.number}"))
        rows.append(IssueVersionRow(version, diff))
        before = version
    return rows[::-1]


def task_model_calls(*, task: Task, limit: int = 50) -> QuerySet:
    return ModelCall.objects.filter(task=task).order_by("-created_at", "-id")[:limit]


def task_language_job(*, task: Task, kind: str):
    return LanguageJob.objects.filter(task=task, kind=kind).select_related("job").order_by("-created_at", "-id").first()


def task_generated_tests(*, task: Task) -> QuerySet:
    return GeneratedTest.objects.filter(task=task).select_related("model_call").order_by("-id")


# --- environments: how often validations shared one, and those that used one ---------------------


@dataclass(frozen=True)
class EnvironmentReuse:
    validations: int  # finished validations that got an environment
    reused: int  # of those, how many reused one built before
    environments: int  # distinct environments they ran in

    @property
    def percent(self) -> float:
        return 100 * self.reused / self.validations if self.validations else 0.0


def environment_reuse(*, validations: QuerySet) -> EnvironmentReuse:
    """How often validations found an environment to share (the builder tries reuse first)."""
    # A check of generated tests runs in the environment of the validation before it: not a reuse.
    with_environment = validations.filter(job__state=Validation.State.SUCCEEDED, environment__isnull=False,
                                          generated=False)
    counts = with_environment.aggregate(total=Count("id"), reused=Count("id", filter=Q(environment_reused=True)),
                                        environments=Count("environment", distinct=True))
    return EnvironmentReuse(counts["total"], counts["reused"], counts["environments"])


def validations_of_environment(*, environment, user, limit: int = 200) -> QuerySet:
    visible = repositories_visible(user=user).values("pk")
    return (Validation.objects.filter(environment=environment, task__repository__in=visible)
            .select_related("task", "job")
            .only("id", "job__state", "job__started_at", "verdict", "reason", "created_at", "environment_reused",
                  "task__instance_id", "task__state")
            .order_by("-created_at", "-id")[:limit])
