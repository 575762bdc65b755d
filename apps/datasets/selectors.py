"""Reads of datasets, runs, imports and candidates, for the pages and the commands. Tasks are seen
through tasks_visible: a dataset shows only the tasks of repositories the person may see."""

from dataclasses import dataclass
from typing import Optional

from django.db.models import Count, Prefetch, Q, QuerySet

from apps.accounts.roles import ADMIN, user_can_review, user_roles

from apps.repositories.services import repository_find
from apps.tasks.models import Task, Validation
from apps.tasks.selectors import repositories_named, tasks_visible
from worker.engine.llm.clients import ModelError
from worker.engine.run.pytest_run import FAILING, PASSING

from .verifiers.judging import judge_identity
from .models import COUNTS_RESOLVED, RESOLVED, Candidate, Dataset, Grade, Import, JudgeScore, Release, Run


def dataset_tasks(dataset: Dataset) -> QuerySet:
    """Every task of the dataset: a repository's mined tasks, or the tasks of its membership rows."""
    if dataset.kind == Dataset.Kind.REPOSITORY:
        return Task.objects.filter(repository_id=dataset.repository_id, source=Task.Source.MINED)
    return Task.objects.filter(memberships__dataset=dataset)


class ScopeNotFound(ValueError):
    """The name given matches no task, repository or dataset; the message says which."""


def tasks_in_scope(*, scope: str = "", dataset: str = "") -> QuerySet:
    """The tasks a command works on: a dataset's (by name), one task (by id), or a repository's valid ones
    (by name, URL or path)."""
    if bool(scope) == bool(dataset):
        raise ScopeNotFound("name one of: a repository or a task, --dataset NAME")
    if dataset:
        found = Dataset.objects.filter(name=dataset).first()
        if found is None:
            raise ScopeNotFound(f"no dataset named {dataset!r}")
        return dataset_tasks(found)
    tasks = Task.objects.filter(instance_id=scope)
    if tasks.exists():
        return tasks
    repository = repository_find(location=scope)
    if repository is None:
        raise ScopeNotFound(f"{scope!r} is neither a task's id nor a registered repository")
    return Task.objects.filter(repository=repository, verdict="valid")


# The sources a command may name: probes are the style probe's own, made from candidates of these;
# `no_patch` puts the predictions without a patch in the pools (by default they are counted beside them).
NAMEABLE_SOURCES = [source for source in Candidate.Source.values if source != Candidate.Source.PROBE] + ["no_patch"]


def sources_chosen(text: str) -> tuple[str, ...]:
    """A command's comma-separated candidate sources; ScopeNotFound saying which are unknown."""
    chosen = tuple(part.strip() for part in text.split(",") if part.strip())
    unknown = sorted(set(chosen) - set(NAMEABLE_SOURCES))
    if unknown or not chosen:
        raise ScopeNotFound(f"unknown candidate source {', '.join(unknown) or '(none given)'}: choose from "
                            f"{', '.join(NAMEABLE_SOURCES)} (probes are the style probe's: probe_style)")
    return chosen


def dataset_of_scope(*, scope: str = "", dataset: str = "") -> Optional[Dataset]:
    """The dataset a command's scope names: the one named, or a repository's own; None for one task."""
    if dataset:
        return Dataset.objects.filter(name=dataset).first()
    if not scope or Task.objects.filter(instance_id=scope).exists():
        return None
    repository = repository_find(location=scope)
    return Dataset.objects.filter(repository=repository).first() if repository else None


def dataset_tasks_visible(dataset: Dataset, *, user) -> QuerySet:
    return dataset_tasks(dataset) & tasks_visible(user=user)


def dataset_seen(*, user, pk: int) -> Optional[Dataset]:
    """The dataset when the person sees at least one of its tasks; None when there is no such dataset or
    its tasks are all hidden from them (it is not there for them: pages and the API answer 404)."""
    dataset = Dataset.objects.select_related("repository").filter(pk=pk).first()
    if dataset is None or not dataset_tasks_visible(dataset, user=user).exists():
        return None
    return dataset


@dataclass
class DatasetRow:
    dataset: Dataset
    tasks: int
    candidates: int
    graded: int


def datasets_listed(*, user) -> list[DatasetRow]:
    """Every dataset with at least one task the person sees, with its counts."""
    rows = []
    for dataset in Dataset.objects.select_related("repository").order_by("kind", "name"):
        tasks = dataset_tasks_visible(dataset, user=user)
        task_count = tasks.count()
        if task_count or dataset.kind != Dataset.Kind.REPOSITORY:
            rows.append(DatasetRow(dataset, task_count, *candidates_counted(tasks=tasks)))
    return rows


def candidates_counted(*, tasks: QuerySet) -> tuple[int, int]:
    """How many candidates the tasks have, and how many of them have a ground truth."""
    counts = Candidate.objects.filter(task__in=tasks).aggregate(
        candidates=Count("id"), graded=Count("id", filter=~Q(outcome="")))
    return counts["candidates"], counts["graded"]


@dataclass
class RunRow:
    run: Run
    tasks: int  # tasks it has a candidate for (in the scope asked)
    resolved: int  # of those, tasks whose candidate is resolved
    ungraded: int  # candidates with no ground truth yet
    no_patch: int
    instances: int  # what SWE-bench's resolved rate is over: the scope's instances, or the run's own tasks

    @property
    def resolved_rate(self) -> Optional[float]:
        """Over every instance, as SWE-bench counts a run ("28 of 300"), not over those graded; None while
        none of its candidates has a ground truth."""
        return self.resolved / self.instances if self.instances and self.ungraded < self.tasks else None


# The instances of a scope a run is measured over: imported instances (their oracle came with them) and
# mined tasks that validated; a mined task still on its way, or found invalid, is no instance yet.
INSTANCES = Q(source=Task.Source.IMPORTED) | Q(verdict="valid")


def runs_summarised(*, tasks: QuerySet, runs: Optional[QuerySet] = None, over_own_tasks: bool = False
                    ) -> list[RunRow]:
    """Each run with candidates among `tasks`: how many it resolved, and its resolved rate over the
    scope's instances (a dataset's page), or over the tasks it has a candidate for (a run's own page,
    where no dataset bounds it); and how many are still ungraded."""
    instances = tasks.filter(INSTANCES).count()
    candidates = Candidate.objects.filter(task__in=tasks, run__isnull=False)
    if runs is not None:
        candidates = candidates.filter(run__in=runs)
    counts = candidates.values("run").annotate(
        tasks=Count("id"), resolved=Count("id", filter=RESOLVED),
        ungraded=Count("id", filter=Q(outcome="")), no_patch=Count("id", filter=Q(no_patch=True)))
    by_id = {run.pk: run for run in Run.objects.filter(pk__in=[row["run"] for row in counts])}
    return sorted((RunRow(by_id[row["run"]], row["tasks"], row["resolved"], row["ungraded"], row["no_patch"],
                          row["tasks"] if over_own_tasks else instances) for row in counts),
                  key=lambda row: row.run.name)


def candidate_counts(*, tasks: QuerySet) -> dict:
    """{source: {outcome or "ungraded": n}} over the tasks' candidates; a resolved one the hacking
    detector flagged (and no curator cleared) counts as "suspicious", not resolved."""
    counts: dict = {}
    for row in Candidate.objects.filter(task__in=tasks).annotate(counted=COUNTS_RESOLVED).values(
            "source", "outcome", "counted").annotate(n=Count("id")):
        key = "suspicious" if row["outcome"] == "resolved" and not row["counted"] else row["outcome"] or "ungraded"
        by_outcome = counts.setdefault(row["source"], {})
        by_outcome[key] = by_outcome.get(key, 0) + row["n"]
    return counts


@dataclass
class SuspiciousCounts:
    flagged: int  # candidates the hacking detector flagged
    awaiting: int  # of those, no curator's word yet
    confirmed: int
    cleared: int
    reasons: dict  # reason -> candidates flagged for it
    awaiting_ids: list  # the candidates awaiting a curator, the first few


def suspicious_counts(*, tasks: QuerySet, shown: int = 20) -> SuspiciousCounts:
    """How many of the tasks' candidates the hacking detector flagged, and what curators said of them."""
    flagged = Candidate.objects.filter(task__in=tasks).exclude(hacking=[])
    counts = flagged.aggregate(n=Count("id"), awaiting=Count("id", filter=Q(hacking_review="")),
                               confirmed=Count("id", filter=Q(hacking_review="confirmed")),
                               cleared=Count("id", filter=Q(hacking_review="cleared")))
    reasons: dict = {}
    for flags in flagged.values_list("hacking", flat=True):
        for reason in {flag.get("reason") for flag in flags}:
            reasons[reason] = reasons.get(reason, 0) + 1
    awaiting = list(flagged.filter(hacking_review="").select_related("task").order_by("task__instance_id", "id")
                    .values_list("id", "task__instance_id")[:shown])
    return SuspiciousCounts(counts["n"], counts["awaiting"], counts["confirmed"], counts["cleared"],
                            dict(sorted(reasons.items())), awaiting)


def task_candidates(*, task: Task) -> QuerySet:
    """The task's candidates, each with `latest_grades` (its latest grade, or none)."""
    latest = Grade.objects.select_related("job").order_by("-created_at", "-id")
    return (Candidate.objects.filter(task=task).select_related("run").order_by("source", "kind", "id")
            .prefetch_related(Prefetch("grades", queryset=latest, to_attr="latest_grades")))


@dataclass
class CandidateScores:
    p_yes: dict  # mode -> P(YES), from the judge in use
    uncertain: list  # the modes whose score is uncertain
    chosen_by: list  # the selectors whose choice it is, over the task's whole pool in scope


def task_candidate_scores(*, task: Task, sources=("import", "sampler")) -> dict[int, CandidateScores]:
    """Per candidate of the task: its judge scores, and which selectors choose it when they see every
    candidate in scope (the judge: the highest P(YES) in the patch mode, ties all marked; the oracle:
    every resolved one)."""
    try:
        model, version = judge_identity()
    except ModelError:
        model, version = "", 0
    found = {c.id: CandidateScores({}, [], []) for c in Candidate.objects.filter(task=task).only("id")}
    for candidate_id, mode, p, uncertain in JudgeScore.objects.filter(
            candidate__task=task, model=model, prompt_version=version).values_list(
            "candidate_id", "mode", "p_yes", "uncertain"):
        scores = found.setdefault(candidate_id, CandidateScores({}, [], []))  # made meanwhile
        scores.p_yes[mode] = p
        if uncertain:
            scores.uncertain.append(mode)
    in_scope = dict(Candidate.objects.filter(task=task, source__in=sources).exclude(outcome="")
                    .annotate(counted=COUNTS_RESOLVED).values_list("id", "counted"))
    for i in in_scope:
        found.setdefault(i, CandidateScores({}, [], []))
    judged = {i: found[i].p_yes["patch"] for i in in_scope if "patch" in found[i].p_yes}
    if judged:
        top = max(judged.values())
        for i, p in judged.items():
            if p == top:
                found[i].chosen_by.append("judge")
    for i, counted in in_scope.items():
        if counted:
            found[i].chosen_by.append("oracle")
    return found


def imports_recent(*, dataset: Optional[Dataset] = None, limit: int = 20) -> QuerySet:
    imports = Import.objects.select_related("dataset")
    if dataset is not None:
        imports = imports.filter(dataset=dataset)
    return imports[:limit]


# --- a grade's runs, as the candidates page shows them ------------------------------------------------


@dataclass(frozen=True)
class Oracle:
    """The hidden tests a grade judged by: resolved only if every one passes."""
    fail_to_pass: tuple
    pass_to_pass: tuple

    def group(self, test_id: str) -> str:
        return "fail_to_pass" if test_id in self.fail_to_pass else "pass_to_pass" if test_id in self.pass_to_pass \
            else ""


def grade_oracle(grade: Grade, *, task: Task, known: Optional[dict] = None) -> Oracle:
    """The oracle of the validation whose environment the grade (of a candidate of `task`) ran in, else
    the task's latest valid one, less the tests the task excludes. `known` keeps those read, for a page
    of grades."""
    known = {} if known is None else known
    key = (task.id, grade.environment_id)
    if key not in known:
        valid = Validation.objects.filter(task=task, verdict="valid", generated=False).order_by("-created_at", "-id")
        validation = (valid.filter(environment_id=grade.environment_id).first() if grade.environment_id else None) \
            or valid.first()
        excluded = set(task.excluded_tests)
        known[key] = Oracle(
            tuple(t for t in (validation.fail_to_pass if validation else []) if t not in excluded),
            tuple(t for t in (validation.pass_to_pass if validation else []) if t not in excluded))
    return known[key]


@dataclass(frozen=True)
class TestShown:
    test_id: str
    status: str  # as the run reported it, or "not reported"
    group: str  # fail_to_pass | pass_to_pass | "" (outside the oracle: it does not count)
    fails: bool  # an oracle test: anything but a pass; any other test: FAILED or ERROR


@dataclass
class RunShown:
    number: int  # from 1
    record: dict  # the stored run: status, exit_code, seconds, untrusted, outcomes, output
    tests: list  # [TestShown]: the oracle's (Fail-to-Pass, then Pass-to-Pass), then the rest; maybe only some
    oracle: int  # the oracle's tests
    oracle_failing: int
    outside: int  # the other tests the run reported
    outside_failing: int

    @property
    def stopped(self) -> str:
        """What ended the run where pytest did not end it itself (a timeout, say); "" otherwise."""
        status = self.record.get("status", "")
        return "" if status in ("ok", "failed", "") else status.replace("_", " ")

    @property
    def folded(self) -> int:
        """The tests not in `tests`: shown on the run's own page."""
        return self.oracle + self.outside - len(self.tests)


def grade_run_shown(grade: Grade, number: int, oracle: Oracle, *, everything: bool = False) -> Optional[RunShown]:
    """The grade's run `number` (from 1): the oracle's tests first, then the rest. Unless `everything`,
    only what a page of candidates shows at once: the Fail-to-Pass tests and every failing test."""
    if not 1 <= number <= len(grade.runs):
        return None
    record = grade.runs[number - 1]
    outcomes = record.get("outcomes", {})
    in_oracle = [TestShown(t, outcomes.get(t, "not reported"), oracle.group(t), outcomes.get(t) not in PASSING)
                 for t in (*oracle.fail_to_pass, *oracle.pass_to_pass)]
    named = set(oracle.fail_to_pass) | set(oracle.pass_to_pass)
    outside = [TestShown(t, status, "", status in FAILING) for t, status in outcomes.items() if t not in named]
    tests = [*in_oracle, *outside] if everything else [
        *(t for t in in_oracle if t.fails or t.group == "fail_to_pass"), *(t for t in outside if t.fails)]
    return RunShown(number, record, tests, len(in_oracle), sum(t.fails for t in in_oracle), len(outside),
                    sum(t.fails for t in outside))


def grade_runs_shown(grade: Grade, oracle: Oracle) -> list[RunShown]:
    """Each of the grade's runs as a page of candidates shows it at once (grade_run_shown)."""
    return [grade_run_shown(grade, number, oracle) for number in range(1, len(grade.runs) + 1)]


# --- releases -------------------------------------------------------------------------------------


def _repository_names_seen(user) -> "set[str] | None":
    """The repositories' names the person may see; None for admins (everything)."""
    return None if ADMIN in user_roles(user) else {one.name for one in repositories_named(user=user)}


def _release_visible(release: Release, *, user, visible: "set[str] | None") -> bool:
    """Whether the person may see a release (or an export): admins all; others one whose tasks'
    repositories they may all see, or (while it has no manifest) one of a repository they see or
    one they asked for."""
    if visible is None:
        return True
    manifest = release.of.manifest if release.of_id else release.manifest
    if manifest:
        return {row["name"] for row in manifest.get("sources", {}).get("repositories", [])} <= visible
    return (release.repository_id is not None and release.repository.name in visible) or \
        release.created_by_id == user.id


def _releases() -> QuerySet:
    return Release.objects.select_related("job", "of", "repository", "same_as").defer(
        "task_ids", "view_task_ids", "of__task_ids", "of__view_task_ids")


def releases_listed(*, user) -> list[Release]:
    """The releases of instances the person may see, by name, newest version first."""
    visible = _repository_names_seen(user)
    return [release for release in _releases().filter(kind=Release.Kind.INSTANCES).order_by("name", "-version", "-id")
            if _release_visible(release, user=user, visible=visible)]


def release_seen(*, user, pk: int) -> Optional[Release]:
    """A release or an export the person may see; None for one they may not (or none). Exports (judge
    training rows, trajectories) carry grades and who made each candidate: curators and admins only,
    as annotators label blind."""
    release = _releases().filter(pk=pk).first()
    if release is None or not _release_visible(release, user=user, visible=_repository_names_seen(user)):
        return None
    if release.kind != Release.Kind.INSTANCES and not user_can_review(user):
        return None
    return release
