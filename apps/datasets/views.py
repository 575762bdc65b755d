"""Pages of datasets, runs, imports and a task's candidates. Reads go through selectors; a task of
a repository the person may not see is a 404, and so is a dataset none of whose tasks they see."""

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import Http404, QueryDict
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from apps.tasks.models import Task
from apps.tasks.selectors import task_for_page, tasks_filtered, tasks_visible
from apps.tasks.views.common import saved_views_for, task_filter_form
from apps.web import diff_html, require_reviewer
from worker.engine.run.pytest_run import output_section_of
from worker.engine.verify.judge import JUDGE_MODES

from . import selectors
from .execution import current_test_set, execution_under_way, verifier_test_flag_set
from .matrices import task_matrix_view, toxic_rows
from .measures import (
    measures_cached,
    measures_page,
    overlap_over_time,
    scope_cached,
    scope_fingerprint,
    self_assessment_probe,
)
from .models import Candidate, Dataset, Execution, Import, ReproductionTests, Run, VerifierTest
from .mutants import mutant_mark_equivalent, task_tests_flag_weak
from .probes import style_probe
from .services import DatasetRefused, dataset_from_view

TASKS_PER_PAGE = 50
CANDIDATES_PER_PAGE = 100
TASK_CANDIDATES_PER_PAGE = 20  # each with its diff highlighted and its trajectory


def dataset_list(request):
    rows = selectors.datasets_listed(user=request.user)
    return render(request, "datasets/dataset_list.html", {"rows": rows,
                                                          "imports": selectors.imports_recent(limit=10)})


def dataset_detail(request, pk: int):
    dataset = get_object_or_404(Dataset.objects.select_related("repository"), pk=pk)
    tasks = selectors.dataset_tasks_visible(dataset, user=request.user)
    if dataset.kind == Dataset.Kind.REPOSITORY and not tasks.exists():
        raise Http404("No such dataset.")
    page = Paginator(tasks.select_related("repository").order_by("instance_id"), TASKS_PER_PAGE).get_page(
        request.GET.get("page"))
    judge_mode = request.GET.get("mode") if request.GET.get("mode") in JUDGE_MODES else JUDGE_MODES[0]
    fingerprint = scope_fingerprint(tasks)  # the figures below are cached under it
    context = {
        "dataset": dataset,
        "page": page,
        "runs": scope_cached(fingerprint, lambda: selectors.runs_summarised(tasks=tasks), "runs"),
        "candidates": scope_cached(fingerprint, lambda: selectors.candidate_counts(tasks=tasks), "candidate_counts"),
        "imports": selectors.imports_recent(dataset=dataset),
        "judge_modes": JUDGE_MODES, "judge_mode": judge_mode,
        "measures": measures_page(measures_cached(tasks, judge_mode=judge_mode, fingerprint=fingerprint)),
        "self_assessment": scope_cached(fingerprint, lambda: self_assessment_probe(tasks, fingerprint=fingerprint),
                                        "self_assessment"),
        "style_probe": scope_cached(fingerprint, lambda: style_probe(tasks, fingerprint=fingerprint), "style_probe"),
        "overlap_over_time": overlap_over_time(dataset, judge_mode),
    }
    return render(request, "datasets/dataset_detail.html", context)


def run_detail(request, pk: int):
    run = get_object_or_404(Run, pk=pk)
    tasks = tasks_visible(user=request.user)
    summary = next(iter(selectors.runs_summarised(tasks=tasks, runs=Run.objects.filter(pk=pk))), None)
    if summary is None:
        raise Http404("No such run.")
    candidates = (run.candidates.filter(task__in=tasks).select_related("task").defer("patch", "trajectory")
                  .order_by("task__instance_id"))
    page = Paginator(candidates, CANDIDATES_PER_PAGE).get_page(request.GET.get("page"))
    return render(request, "datasets/run_detail.html", {"run": run, "summary": summary, "page": page})


def import_detail(request, pk: int):
    imported = get_object_or_404(Import.objects.select_related("dataset"), pk=pk)
    return render(request, "datasets/import_detail.html", {"imported": imported})


def candidate_detail(request, pk: int):
    """A candidate, where it is shown: on its task's candidates page."""
    candidate = get_object_or_404(Candidate.objects.filter(task__in=tasks_visible(user=request.user))
                                  .select_related("task"), pk=pk)
    return redirect(reverse("datasets:task_candidates", args=[candidate.task.instance_id]) + f"#candidate-{pk}")


def task_candidates(request, instance_id: str):
    try:
        task = task_for_page(user=request.user, instance_id=instance_id)
    except Task.DoesNotExist:
        raise Http404("No such task.") from None
    page = Paginator(selectors.task_candidates(task=task), TASK_CANDIDATES_PER_PAGE).get_page(request.GET.get("page"))
    scores = selectors.task_candidate_scores(task=task)
    candidates = [(candidate, diff_html(candidate.patch) if candidate.patch else "", scores.get(candidate.id))
                  for candidate in page.object_list]
    survivors = Candidate.objects.filter(task=task, source=Candidate.Source.MUTANT, outcome="resolved").exclude(
        made__equivalent=True).count()
    return render(request, "datasets/task_candidates.html", {"task": task, "candidates": candidates, "page": page,
                                                             "survivors": survivors})


@require_POST
def mutant_equivalent(request, pk: int):
    """Mark a surviving mutant equivalent to a right fix (or take that back); reviewers only."""
    require_reviewer(request)
    mutants = Candidate.objects.filter(task__in=tasks_visible(user=request.user), source=Candidate.Source.MUTANT)
    candidate = get_object_or_404(mutants.select_related("task"), pk=pk)
    equivalent = request.POST.get("equivalent", "1") == "1"
    mutant_mark_equivalent(candidate=candidate, equivalent=equivalent)
    messages.success(request, f"The {candidate.kind} mutant is {'marked' if equivalent else 'no longer'} equivalent; "
                              "the mutation score is recomputed.")
    return redirect(reverse("tasks:review", args=[candidate.task.instance_id]) + "#mutants")


@require_POST
def tests_weak(request, instance_id: str):
    require_reviewer(request)
    try:
        task = task_for_page(user=request.user, instance_id=instance_id)
    except Task.DoesNotExist:
        raise Http404("No such task.") from None
    task_tests_flag_weak(task=task, user=request.user)
    messages.success(request, f"The tests of {task.instance_id} are flagged as too weak (see its history).")
    return redirect(reverse("tasks:review", args=[task.instance_id]) + "#mutants")


@require_POST
def dataset_from_saved_view(request, pk: int):
    """A dataset of the tasks a saved view matches now, as this person sees them."""
    require_reviewer(request)
    view = get_object_or_404(saved_views_for(request.user), pk=pk)
    filters = task_filter_form(QueryDict(view.query), user=request.user).filters()
    task_ids = list(tasks_filtered(user=request.user, **filters).values_list("id", flat=True))
    try:
        dataset = dataset_from_view(view=view, name=request.POST.get("name", ""), task_ids=task_ids,
                                    user=request.user)
    except DatasetRefused as refused:
        messages.error(request, f"No dataset made: {refused}.")
        return redirect(reverse("tasks:all") + f"?{view.query}")
    messages.success(request, f"Dataset {dataset.name} made of the {len(task_ids)} tasks the view matches now.")
    return redirect("datasets:detail", pk=dataset.pk)


def _task_or_404(request, instance_id: str) -> Task:
    try:
        return task_for_page(user=request.user, instance_id=instance_id)
    except Task.DoesNotExist:
        raise Http404("No such task.") from None


def task_matrix(request, instance_id: str):
    """Candidates × verifier tests: each cell a run's outcome, opening its log."""
    task = _task_or_404(request, instance_id)
    test_set = current_test_set(task)
    return render(request, "datasets/task_matrix.html", {
        "task": task, "matrix": task_matrix_view(task), "test_set": test_set,
        "reproduction": ReproductionTests.objects.filter(task=task).select_related("job").first(),
        "under_way": execution_under_way([task])})


def execution_log(request, pk: int):
    """One cell of a matrix: what the run wrote about that test (its whole output when pytest wrote
    nothing of it alone)."""
    execution = get_object_or_404(Execution.objects.filter(candidate__task__in=tasks_visible(user=request.user))
                                  .select_related("candidate__task", "test_set"), pk=pk)
    position = request.GET.get("test", "")
    test = execution.test_set.tests.filter(position=int(position)).first() if position.isdigit() else None
    section = output_section_of(execution.output, test.test_id) if test else None
    return render(request, "datasets/execution_log.html", {
        "execution": execution, "task": execution.candidate.task, "test": test, "section": section,
        "status": execution.outcomes.get(test.test_id, "not run") if test else ""})


@require_POST
def verifier_test_flag(request, pk: int):
    """Flag a verifier test toxic or never distinguishing (or clear the flag); reviewers only."""
    require_reviewer(request)
    test = get_object_or_404(VerifierTest.objects.filter(test_set__task__in=tasks_visible(user=request.user))
                             .select_related("test_set__task"), pk=pk)
    try:
        verifier_test_flag_set(test=test, flag=request.POST.get("flag", ""), note=request.POST.get("note", ""),
                               user=request.user)
    except ValueError as refused:
        messages.error(request, str(refused))
    else:
        messages.success(request, f"{test.test_id}: {test.get_flag_display()}.")
    return redirect(reverse("tasks:review", args=[test.test_set.task.instance_id]) + "#verifier-tests")


def toxic_tests(request, pk: int):
    """The dataset's toxic verifier tests (pass a wrong candidate, fail a right one), each one click from
    its task's curation page."""
    dataset = get_object_or_404(Dataset, pk=pk)
    tasks = selectors.dataset_tasks_visible(dataset, user=request.user)
    if not tasks.exists():
        raise Http404("No such dataset.")
    measured = measures_cached(tasks, fingerprint=scope_fingerprint(tasks))
    return render(request, "datasets/toxic_tests.html", {"dataset": dataset,
                                                         "rows": toxic_rows(measured.execution.get("toxic", [])),
                                                         "execution": measured.execution})
