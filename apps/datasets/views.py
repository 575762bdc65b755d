"""Pages of datasets, runs, imports and a task's candidates. Reads go through selectors; a task of
a repository the person may not see is a 404, and so is a dataset none of whose tasks they see."""

import json
import re
from datetime import date

from django.conf import settings
from django.contrib import messages
from django.core.paginator import Paginator
from django.http import FileResponse, Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.functional import SimpleLazyObject
from django.views.decorators.http import require_POST

from apps.accounts.roles import user_can_mine, user_can_review
from apps.pages import diff_html, page_render, require_miner, require_reviewer, require_unblinded
from apps.tasks.models import Task
from apps.tasks.selectors import repositories_named, task_for_page, tasks_visible
from apps.tasks.views.common import saved_view_task_ids, saved_views_for
from worker.engine.run.pytest_run import output_section_of
from worker.engine.verify.judge import JUDGE_MODES

from . import selectors
from .registry import DATASET_PAGE
from .verifiers.execution import current_test_set, execution_under_way, verifier_test_flag_set
from .grading.hacking import HackingReviewRefused, candidate_hacking_review, hacking_flags_shown
from .verifiers.matrices import execution_said, task_matrix_view, toxic_rows
from .verifiers.measures import (
    measures_cached,
    measures_page,
    overlap_over_time,
    scope_cached,
    scope_fingerprint,
    scope_key,
    self_assessment_probe,
)
from .models import (
    RESOLVED,
    Candidate,
    Dataset,
    Execution,
    Grade,
    Import,
    Release,
    ReleaseImages,
    ReproductionTests,
    Run,
    Upload,
    VerifierTest,
)
from .candidates.mutants import mutant_mark_equivalent, task_tests_flag_weak
from .candidates.probes import style_probe
from .releases import (
    ReleaseRefused,
    export_start,
    release_file_found,
    release_scope_of_dataset,
    release_start,
    release_withdraw,
    scope_of_repository,
    scope_of_view,
)
from .making import DatasetRefused, dataset_from_view
from .candidates.uploads import UploadRefused, upload_start

TASKS_PER_PAGE = 50
CANDIDATES_PER_PAGE = 100
TASK_CANDIDATES_PER_PAGE = 20  # each with its diff highlighted and its trajectory


def dataset_list(request, *, upload_refusal: str = "", status: int = 200):
    """The datasets, recent imports and uploads, and the form that uploads files to import."""
    rows = selectors.datasets_listed(user=request.user)
    return render(request, "datasets/dataset_list.html", {
        "rows": rows, "imports": selectors.imports_recent(limit=10),
        "uploads": Upload.objects.select_related("job", "imported").order_by("-created_at", "-id")[:5],
        "can_upload": user_can_mine(request.user), "upload_refusal": upload_refusal,
        "upload_limit_mb": settings.COMMITGYM_UPLOAD_MAX_BYTES // 1_000_000,
        "upload_values": request.POST if upload_refusal else {}}, status=status)


@require_POST
def upload_new(request):
    """Keep the uploaded files and queue their import; refused at once, with the reason and the
    typed fields kept, when they cannot be imported as given."""
    require_miner(request)
    try:
        upload = upload_start(kind=request.POST.get("kind", ""), file=request.FILES.get("file"),
                              report=request.FILES.get("report"), trajectories=request.FILES.getlist("trajectories"),
                              dataset_name=request.POST.get("dataset_name", "").strip()[:200],
                              run_name=request.POST.get("run_name", "").strip()[:200], user=request.user)
    except UploadRefused as refused:
        return dataset_list(request, upload_refusal=str(refused), status=400)
    messages.success(request, f"{upload.file_name} uploaded: job {upload.job_id} imports it.")
    return redirect("datasets:upload", pk=upload.pk)


def upload_detail(request, pk: int):
    """An upload's import: followed while its job runs, then its counts."""
    upload = get_object_or_404(Upload.objects.select_related("job", "imported__dataset", "created_by"), pk=pk)
    return page_render(request, "datasets/upload_detail.html", {"upload": upload}, partial="status")


def dataset_detail(request, pk: int):
    dataset = get_object_or_404(Dataset.objects.select_related("repository"), pk=pk)
    tasks = selectors.dataset_tasks_visible(dataset, user=request.user)
    if dataset.kind == Dataset.Kind.REPOSITORY and not tasks.exists():
        raise Http404("No such dataset.")
    page = Paginator(tasks.select_related("repository").order_by("instance_id"), TASKS_PER_PAGE).get_page(
        request.GET.get("page"))
    judge_mode = request.GET.get("mode") if request.GET.get("mode") in JUDGE_MODES else JUDGE_MODES[0]
    fingerprint = scope_fingerprint(tasks)  # the figures below are cached under it
    # The figures' section is kept rendered under the same fingerprint (the template's cache tag): each is
    # computed only when that section is drawn again.
    figures = {
        "runs": lambda: scope_cached(fingerprint, lambda: selectors.runs_summarised(tasks=tasks), "runs"),
        "candidates": lambda: scope_cached(fingerprint, lambda: selectors.candidate_counts(tasks=tasks),
                                           "candidate_counts"),
        "measures": lambda: measures_page(measures_cached(tasks, judge_mode=judge_mode, fingerprint=fingerprint)),
        "self_assessment": lambda: scope_cached(
            fingerprint, lambda: self_assessment_probe(tasks, fingerprint=fingerprint), "self_assessment"),
        "style_probe": lambda: scope_cached(fingerprint, lambda: style_probe(tasks, fingerprint=fingerprint),
                                            "style_probe"),
        "overlap_over_time": lambda: overlap_over_time(dataset, judge_mode),
        "suspicious": lambda: scope_cached(fingerprint, lambda: selectors.suspicious_counts(tasks=tasks),
                                           "suspicious"),
    }
    context = {
        "dataset": dataset,
        "page": page,
        "imports": selectors.imports_recent(dataset=dataset),
        "judge_modes": JUDGE_MODES, "judge_mode": judge_mode,
        # A verify run that found nothing new still adds its snapshot to the overlap over time.
        "figures_key": scope_key(fingerprint, "dataset_figures_html", dataset.pk,
                                 dataset.snapshots.order_by("-id").values_list("id", flat=True).first()),
        **{name: SimpleLazyObject(compute) for name, compute in figures.items()},
        **DATASET_PAGE.context(dataset=dataset, tasks=tasks, user=request.user, fingerprint=fingerprint),
    }
    return render(request, "datasets/dataset_detail.html", context)


def run_detail(request, pk: int):
    require_unblinded(request)
    run = get_object_or_404(Run, pk=pk)
    tasks = tasks_visible(user=request.user)
    summary = next(iter(selectors.runs_summarised(tasks=tasks, runs=Run.objects.filter(pk=pk), over_own_tasks=True)),
                   None)
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
    require_unblinded(request)
    candidate = get_object_or_404(Candidate.objects.filter(task__in=tasks_visible(user=request.user))
                                  .select_related("task"), pk=pk)
    return redirect(reverse("datasets:task_candidates", args=[candidate.task.instance_id]) + f"#candidate-{pk}")


def task_candidates(request, instance_id: str):
    require_unblinded(request)
    try:
        task = task_for_page(user=request.user, instance_id=instance_id)
    except Task.DoesNotExist:
        raise Http404("No such task.") from None
    page = Paginator(selectors.task_candidates(task=task), TASK_CANDIDATES_PER_PAGE).get_page(request.GET.get("page"))
    scores = selectors.task_candidate_scores(task=task)
    oracles: dict = {}  # read once for the page's grades

    def runs(candidate) -> list:
        """Its latest grade's runs, as the page shows them at once."""
        grade = next(iter(candidate.latest_grades), None)
        return selectors.grade_runs_shown(grade, selectors.grade_oracle(grade, task=task, known=oracles)) \
            if grade else []

    listed = list(page.object_list)
    for candidate in listed:
        candidate.flags_shown = hacking_flags_shown(candidate.hacking)
    candidates = [(candidate, diff_html(candidate.patch) if candidate.patch else "", scores.get(candidate.id),
                   runs(candidate)) for candidate in listed]
    survivors = Candidate.objects.filter(RESOLVED, task=task, source=Candidate.Source.MUTANT).exclude(
        made__equivalent=True).count()
    return render(request, "datasets/task_candidates.html", {"task": task, "candidates": candidates, "page": page,
                                                             "survivors": survivors,
                                                             "can_review": user_can_review(request.user)})


@require_POST
def candidate_hacking(request, pk: int):
    """A curator clears a flagged candidate (a real fix: it counts as its grade says) or confirms it (it
    games the tests), with a note; recorded with who and when."""
    require_reviewer(request, "Only curators and admins can clear or confirm a flagged candidate.")
    candidate = get_object_or_404(Candidate.objects.filter(task__in=tasks_visible(user=request.user))
                                  .select_related("task"), pk=pk)
    try:
        candidate_hacking_review(candidate=candidate, verdict=request.POST.get("verdict", ""),
                                 note=request.POST.get("note", ""), user=request.user)
    except HackingReviewRefused as refused:
        messages.error(request, f"Not recorded: {refused}.")
    else:
        messages.success(request, f"Candidate {candidate.pk}: {candidate.get_hacking_review_display()}"
                                  f"{'' if candidate.suspicious else '; it counts as its grade says'}.")
    return redirect(reverse("datasets:task_candidates", args=[candidate.task.instance_id]) + f"#candidate-{pk}")


def grade_run(request, pk: int, number: int):
    """One run of a candidate's grade, every test of it (the oracle's first) and its output; an htmx
    request gets the tests and output alone, for the candidates page to fold out."""
    require_unblinded(request)
    grade = get_object_or_404(Grade.objects.filter(candidate__task__in=tasks_visible(user=request.user))
                              .select_related("candidate__task", "candidate__run", "job"), pk=pk)
    task = grade.candidate.task
    run = selectors.grade_run_shown(grade, number, selectors.grade_oracle(grade, task=task), everything=True)
    if run is None:
        raise Http404("No such run of this grade.")
    return page_render(request, "datasets/grade_run.html", {"grade": grade, "task": task, "run": run},
                       partial="run_tests")


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
    task_ids = saved_view_task_ids(view=view, user=request.user)
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
    require_unblinded(request)
    task = _task_or_404(request, instance_id)
    test_set = current_test_set(task)
    return render(request, "datasets/task_matrix.html", {
        "task": task, "matrix": task_matrix_view(task), "test_set": test_set,
        "reproduction": ReproductionTests.objects.filter(task=task).select_related("job").first(),
        "under_way": execution_under_way([task])})


def execution_log(request, pk: int):
    """One cell of a matrix: what the run wrote about that test (its whole output when pytest wrote
    nothing of it alone)."""
    require_unblinded(request)
    execution = get_object_or_404(Execution.objects.filter(candidate__task__in=tasks_visible(user=request.user))
                                  .select_related("candidate__task", "test_set"), pk=pk)
    position = request.GET.get("test", "")
    test = execution.test_set.tests.filter(position=int(position)).first() if position.isdigit() else None
    section = output_section_of(execution.output, test.test_id) if test else None
    return render(request, "datasets/execution_log.html", {
        "execution": execution, "task": execution.candidate.task, "test": test, "section": section,
        "status": execution.outcomes.get(test.test_id, "not run") if test else "",
        "said": execution_said(execution, list(execution.test_set.tests.all()))})


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
    require_unblinded(request)
    dataset = get_object_or_404(Dataset, pk=pk)
    tasks = selectors.dataset_tasks_visible(dataset, user=request.user)
    if not tasks.exists():
        raise Http404("No such dataset.")
    measured = measures_cached(tasks, fingerprint=scope_fingerprint(tasks))
    return render(request, "datasets/toxic_tests.html", {"dataset": dataset,
                                                         "rows": toxic_rows(measured.execution.get("toxic", [])),
                                                         "execution": measured.execution})


# --- releases ----------------------------------------------------------------------------------


def release_list(request):
    return render(request, "datasets/release_list.html", {"releases": selectors.releases_listed(user=request.user)})


def _release_or_404(request, pk: int) -> Release:
    release = selectors.release_seen(user=request.user, pk=pk)
    if release is None:
        raise Http404("No such release.")
    return release


def release_detail(request, pk: int):
    release = _release_or_404(request, pk)
    return render(request, "datasets/release_detail.html", {
        "release": release, "exports": release.exports.select_related("job").order_by("-id"),
        "image_builds": release.image_builds.select_related("job").order_by("-id")[:5],
        "manifest_text": json.dumps(release.manifest, indent=2, sort_keys=True) if release.manifest else ""})


def release_images_detail(request, pk: int):
    """A building of a release's images: shown on the release's page."""
    build = get_object_or_404(ReleaseImages.objects.only("release_id"), pk=pk)
    return redirect(f"{reverse('datasets:release', args=[build.release_id])}#images")


def release_file(request, pk: int, name: str):
    """One of a release's files, as written (its size checked against the record)."""
    release = _release_or_404(request, pk)
    path = release_file_found(release, name)
    if path is None:
        raise Http404("No such file in this release (or it changed on disk).")
    return FileResponse(open(path, "rb"), as_attachment=True, filename=f"{release}-{name}".replace("@", "-"))


def _release_scope(request):
    """The dataset, repository or saved view a release is asked of (?scope=KIND&id=N), as a
    ReleaseScope; 404 when the person may not see it."""
    kind, pk = request.GET.get("scope") or request.POST.get("scope"), request.GET.get("id") or request.POST.get("id")
    if not re.fullmatch(r"[0-9]{1,18}", pk or ""):
        raise Http404("Name what to release.")
    if kind == Release.Scope.DATASET:
        return release_scope_of_dataset(get_object_or_404(Dataset, pk=pk), user=request.user)
    if kind == Release.Scope.REPOSITORY:
        repository = next((one for one in repositories_named(user=request.user) if one.pk == int(pk)), None)
        if repository is None:
            raise Http404("No such repository.")
        return scope_of_repository(repository)
    if kind == Release.Scope.VIEW:
        view = get_object_or_404(saved_views_for(request.user), pk=pk)
        return scope_of_view(view, saved_view_task_ids(view=view, user=request.user))
    raise Http404("Name what to release.")


def release_new(request):
    """The form of "Release…" from a dataset, a repository or a saved view; the release is a job."""
    require_reviewer(request)
    scope = _release_scope(request)
    values = {"name": re.sub(r"[^A-Za-z0-9._-]+", "-", scope.label).strip("-._")[:100] or "release",
              "states": [Task.State.ACCEPTED], "since": ""}
    error = ""
    if request.method == "POST":
        values = {"name": request.POST.get("name", "").strip(), "states": request.POST.getlist("states"),
                  "since": request.POST.get("since", "").strip()}
        try:
            since = date.fromisoformat(values["since"]) if values["since"] else None
        except ValueError:
            error = f"{values['since']!r} is not a date (YYYY-MM-DD)."
        if not error:
            try:
                release = release_start(name=values["name"], scope=scope, states=tuple(values["states"]), since=since,
                                        user=request.user)
            except ReleaseRefused as refused:
                error = f"No release made: {refused}."
            else:
                messages.success(request, f"The next version of {release.name} is being written (job "
                                          f"{release.job_id}); this page shows it when it is done.")
                return redirect("datasets:release", pk=release.pk)
    return render(request, "datasets/release_new.html", {
        "scope": scope, "scope_id": request.GET.get("id") or request.POST.get("id"), "values": values,
        "error": error, "states": Task.State.choices})


@require_POST
def release_withdraw_view(request, pk: int):
    require_reviewer(request)
    release = _release_or_404(request, pk)
    try:
        release_withdraw(release=release, user=request.user, reason=request.POST.get("reason", ""))
    except ReleaseRefused as refused:
        messages.error(request, f"Not withdrawn: {refused}.")
    else:
        messages.success(request, f"{release} is withdrawn: it is kept, marked, and its number is never given again.")
    return redirect("datasets:release", pk=release.pk)


@require_POST
def export_new(request, pk: int):
    require_reviewer(request)
    release = _release_or_404(request, pk)
    try:
        export = export_start(release=release, kind=request.POST.get("kind", ""), user=request.user)
    except ReleaseRefused as refused:
        messages.error(request, f"No export made: {refused}.")
    else:
        messages.success(request, f"The {export.get_kind_display().lower()} is being written (job {export.job_id}).")
    return redirect("datasets:release", pk=release.pk)
