"""Pages of the Commit Mine. Reads go through selectors, writes through services.

Every view checks permissions itself: a repository the user may not see is a 404,
and writes by users who may not mine are a 403.
"""

from dataclasses import dataclass, field

from django.contrib import messages
from django.core.paginator import Paginator
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.debug import sensitive_post_parameters
from django.views.decorators.http import require_http_methods, require_POST
from unidiff import PatchSet
from unidiff.errors import UnidiffParseError

from apps.accounts.roles import user_can_mine
from apps.pages import diff_html, page_render, redirect_back, require_miner
from worker.engine.git.repo import GitError, commit_patch
from worker.engine.reasons import MINING_DROP_REASONS

from . import selectors, services
from .forms import CommitFilterForm, RepositoryFiltersForm, RepositoryRegisterForm
from .models import Commit, MiningJob
from .registry import REPOSITORY_PAGE

COMMITS_PER_PAGE = 50


# --- helpers ---------------------------------------------------------------------


def _visible_repository(request, pk: int):
    return get_object_or_404(selectors.repositories_visible(user=request.user), pk=pk)


def _job_started_message(request, job: MiningJob, created: bool) -> None:
    if created:
        messages.success(request, f"Mining job {job.pk} queued for {job.repository.name}.")
    else:
        messages.info(request, f"Mining job {job.pk} is already {job.state} for {job.repository.name}.")


# --- repositories ------------------------------------------------------------------


@sensitive_post_parameters("location", "ssh_key")
@require_http_methods(["GET", "POST"])
def repository_list(request):
    form = RepositoryRegisterForm(user=request.user)
    if request.method == "POST":
        require_miner(request)
        form = RepositoryRegisterForm(request.POST, user=request.user)
        repository = form.register() if form.is_valid() else None
        if repository is not None:
            if repository.registration_warning:
                messages.warning(request, repository.registration_warning)
            job, created = services.mining_job_start(repository=repository, user=request.user)
            _job_started_message(request, job, created)
            return redirect("repositories:detail", pk=repository.pk)
    search = request.GET.get("q", "")[:200]
    context = {
        "repositories": selectors.repositories_listed(user=request.user, text=search),
        "search": search,
        "register_form": form,
        "can_mine": user_can_mine(request.user),
    }
    return render(request, "repositories/repository_list.html", context, status=400 if form.errors else 200)


def _detail_context(request, repository, *, filters_form=None) -> dict:
    # The jobs first, then what they write: a job that finishes between the reads then shows as still
    # running (and its poll reloads the page), never as finished beside an empty funnel.
    jobs = list(selectors.mining_jobs_recent(repository=repository))
    repository.refresh_from_db()
    funnel = selectors.repository_funnel(repository=repository)
    total = funnel[0].remaining or 1
    return {
        "repository": repository,
        "funnel": [(step, 100 * step.remaining / total, 100 * step.dropped / total) for step in funnel],
        "reasons": MINING_DROP_REASONS,
        "jobs": jobs,
        "filters_form": filters_form or RepositoryFiltersForm.for_repository(repository),
        "can_mine": user_can_mine(request.user),
        **REPOSITORY_PAGE.context(request, repository),
    }


def repository_detail(request, pk: int):
    repository = _visible_repository(request, pk)
    context = _detail_context(request, repository)
    return render(request, "repositories/repository_detail.html", context)


@require_POST
def repository_mine(request, pk: int):
    repository = _visible_repository(request, pk)
    require_miner(request)
    job, created = services.mining_job_start(repository=repository, user=request.user)
    _job_started_message(request, job, created)
    return redirect("repositories:detail", pk=repository.pk)


@require_POST
def repository_filters(request, pk: int):
    repository = _visible_repository(request, pk)
    require_miner(request)
    form = RepositoryFiltersForm(request.POST)
    if not form.is_valid():
        context = _detail_context(request, repository, filters_form=form)
        return render(request, "repositories/repository_detail.html", context, status=400)
    try:
        job = services.repository_filters_update(repository=repository, user=request.user, **form.cleaned_data)
    except services.RepositoryBusy as busy:
        messages.error(request, str(busy))
        context = _detail_context(request, repository, filters_form=form)
        return render(request, "repositories/repository_detail.html", context, status=409)
    if job.refilter_only:
        messages.success(request, f"Filters saved: job {job.pk} re-applies them to the stored commits.")
    else:
        messages.success(request, f"Test-file rules changed: mining job {job.pk} measures every commit again.")
    return redirect("repositories:detail", pk=repository.pk)


def _counted(count: int, thing: str) -> str:
    return f"{count:,} {thing}{'' if count == 1 else 's'}"


@require_http_methods(["GET", "POST"])
def repository_delete(request, pk: int):
    repository = _visible_repository(request, pk)
    require_miner(request)
    summary = selectors.repository_delete_summary(repository=repository)
    if request.method == "POST":
        name = repository.name
        services.repository_delete(repository=repository)
        mirror = " and its mirror." if summary["mirror_bytes"] is not None else "; it had no mirror."
        messages.success(request, f"Deleted {name}: {_counted(summary['commits'], 'commit')}, "
                                  f"{_counted(summary['tasks'], 'task')}, {_counted(summary['jobs'], 'mining job')}"
                                  + mirror)
        return redirect("repositories:list")
    return render(request, "repositories/repository_delete.html", {"repository": repository, "summary": summary})


# --- mining jobs -------------------------------------------------------------------


def mining_job_state(request, pk: int, job_id: int):
    """The job's live state; htmx polls it while the job is queued or running."""
    repository = _visible_repository(request, pk)
    if not request.htmx:
        return redirect("repositories:detail", pk=repository.pk)
    job = get_object_or_404(MiningJob.objects.select_related("repository", "job"), repository=repository, pk=job_id)
    context = {"job": job, "can_mine": user_can_mine(request.user), "back_url": request.htmx.current_url_abs_path}
    response = page_render(request, "repositories/repository_list.html", context, partial="job_state")
    if not job.is_active:
        # Everything else on the page (funnel, counts, branch, job times) changed too.
        response["HX-Refresh"] = "true"
    return response


@require_POST
def mining_job_cancel(request, pk: int, job_id: int):
    repository = _visible_repository(request, pk)
    require_miner(request)
    job = get_object_or_404(MiningJob.objects.select_related("job"), repository=repository, pk=job_id)
    services.mining_job_cancel(job=job)
    messages.info(request, f"Mining job {job.pk} cancelled.")
    return redirect_back(request, redirect("repositories:detail", pk=repository.pk))


@require_POST
def mining_job_retry(request, pk: int, job_id: int):
    repository = _visible_repository(request, pk)
    require_miner(request)
    job = get_object_or_404(MiningJob.objects.select_related("repository"), repository=repository, pk=job_id)
    new_job = services.mining_job_retry(job=job, user=request.user)
    _job_started_message(request, new_job, new_job.pk != job.pk)
    return redirect_back(request, redirect("repositories:detail", pk=repository.pk))


# --- commits -----------------------------------------------------------------------


def _status_choices(counts: dict[str, int]) -> list[tuple[str, str]]:
    total, kept = sum(counts.values()), counts.get("", 0)
    return [
        ("", f"All ({total:,})"),
        ("kept", f"Kept ({kept:,})"),
        ("dropped", f"Dropped ({total - kept:,})"),
        *[(reason, f"{reason} ({counts.get(reason, 0):,})") for reason in MINING_DROP_REASONS],
    ]


def commit_list(request, pk: int):
    repository = _visible_repository(request, pk)
    counts = selectors.repository_drop_counts(repository=repository)
    form = CommitFilterForm(request.GET, status_choices=_status_choices(counts))
    commits = selectors.commits_filtered(repository=repository, **form.filters())
    page = Paginator(commits, COMMITS_PER_PAGE).get_page(request.GET.get("page"))
    context = {"repository": repository, "form": form, "page": page}
    return page_render(request, "repositories/commit_list.html", context, partial="results")


@dataclass
class DiffFile:
    path: str
    added: int
    removed: int
    html: str


@dataclass
class DiffSection:
    title: str
    files: list[DiffFile] = field(default_factory=list)


def _diff_sections(repository, patch_text: str) -> list[DiffSection]:
    """The diff's files split into source (non-test .py), tests and other files, as mining counts them."""
    rules = repository.test_file_rules()
    sections = {"source": DiffSection("Source"), "test": DiffSection("Tests"), "other": DiffSection("Other")}
    for patched in PatchSet(patch_text):
        sections[rules.kind(patched.path)].files.append(
            DiffFile(patched.path, patched.added, patched.removed, diff_html(str(patched))))
    return [section for section in sections.values() if section.files]


def _commit_diff(repository, commit: Commit) -> dict:
    """{"sections", "truncated", "problem"}: problem is a sentence when the diff cannot be shown."""
    if not repository.mirror_dir.is_dir():
        return {"problem": "The repository's mirror is not on disk (it is made by the next mining job)."}
    try:
        text, truncated = commit_patch(repository.mirror_dir, commit.sha)
    except (GitError, OSError):
        return {"problem": "git could not read this commit from the mirror."}
    last_file = text.rfind("\ndiff --git ")
    if truncated and last_file > 0:  # drop the file cut in the middle
        text = text[: last_file + 1]
    if not text.strip():
        return {"problem": "git returned no diff for this commit (it may be missing from the mirror, "
                           "or change no file contents)."}
    try:
        sections = _diff_sections(repository, text)
    except UnidiffParseError:
        return {"problem": "The diff could not be parsed.", "truncated": truncated}
    return {"sections": sections, "truncated": truncated}


def commit_detail(request, pk: int, sha: str):
    repository = _visible_repository(request, pk)
    commit = get_object_or_404(Commit.objects.prefetch_related("tasks").select_related("kept_by"),
                               repository=repository, sha=sha)
    context = {"repository": repository, "commit": commit, "diff": _commit_diff(repository, commit),
               "can_mine": user_can_mine(request.user)}
    return render(request, "repositories/commit_detail.html", context)


@require_POST
def commit_keep_view(request, pk: int, sha: str):
    """Keep a commit a filter dropped, with why (curators)."""
    repository = _visible_repository(request, pk)
    require_miner(request)
    commit = get_object_or_404(Commit, repository=repository, sha=sha)
    try:
        commit = services.commit_keep(commit=commit, user=request.user, note=request.POST.get("note", ""))
    except services.CommitNotKept as refused:
        messages.error(request, f"Not kept: {refused}.")
    else:
        messages.success(request, f"Kept by hand; {commit.task.instance_id if commit.task else 'its task'} waits to "
                                  "be validated, and filters applied again keep it.")
    return redirect("repositories:commit", pk=repository.pk, sha=commit.sha)
