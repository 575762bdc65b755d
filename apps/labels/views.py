"""Pages of labelling: the annotator's queue and item (blind: nothing on the page says who or what
made the patch, how it was graded or scored, or what anyone else said), a curator's unblinded view
and settlement, and a dataset's labels page. Every action is a plain form or link."""

from datetime import datetime
from datetime import timezone as dt_timezone

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.core.cache import cache
from django.core.paginator import Paginator
from django.http import Http404
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_POST
from unidiff import PatchSet
from unidiff.errors import UnidiffParseError

from apps.accounts.roles import user_can_review, user_roles
from apps.datasets.candidates.mutants import files_at_commits
from apps.datasets.models import Candidate, Dataset, Execution, JudgeScore
from apps.datasets.selectors import dataset_seen, dataset_tasks_visible
from apps.pages import require_reviewer
from apps.tasks.diffs import patch_files
from apps.tasks.models import current_issue
from apps.tasks.selectors import task_base_sha
from worker.engine.git.context import patch_with_context
from worker.engine.git.repo import GitError
from worker.engine.label.queue import RANDOM
from worker.engine.verify.judge import JUDGE_MODES

from . import selectors, services
from .models import Label, QueueOrder, Settlement, Verdict

CONTEXT_LINES = {"3": 3, "25": 25, "all": 1_000_000}
ROWS_PER_PAGE = 50  # of the candidate-by-candidate table
CONTEXT_CHOICES = [("3", "3 lines"), ("25", "25 lines"), ("all", "whole files")]


def _dataset_seen(request, pk: int) -> Dataset:
    """The dataset, when the person sees at least one of its tasks; else a 404."""
    dataset = dataset_seen(user=request.user, pk=pk)
    if dataset is None:
        raise Http404("No such dataset.")
    return dataset


def _candidate_seen(request, dataset: Dataset, candidate_id: int) -> Candidate:
    candidate = (Candidate.objects.filter(pk=candidate_id, task__in=dataset_tasks_visible(dataset, user=request.user))
                 .select_related("task__repository", "task__commit").first())
    if candidate is None:
        raise Http404("No such candidate in this dataset.")
    return candidate


def _require_labeller(request) -> None:
    if not user_roles(request.user):
        raise PermissionDenied("Only annotators, curators and admins label candidates.")


# --- the annotator's queue and item ---------------------------------------------------------------


def queue_next(request, pk: int):
    """The annotator's next item, held for them; `skip` passes over the current one."""
    _require_labeller(request)
    dataset = _dataset_seen(request, pk)
    skip = int(request.GET["skip"]) if request.GET.get("skip", "").isdecimal() else None
    candidate = services.label_queue_next(dataset=dataset, user=request.user, skip=skip)
    if candidate is None:
        return render(request, "labels/queue_empty.html", {
            "dataset": dataset, "labelled": Label.objects.filter(dataset=dataset, annotator=request.user).count()})
    return redirect("labels:item", pk=dataset.pk, candidate_id=candidate.pk)


def patch_shown(candidate: Candidate, context: str) -> str:
    """The candidate's patch with `context` lines around each change, read at the task's base commit
    (a mined task's parent, an imported one's base), cached: neither ever changes."""
    if context == "3" or not candidate.patch:
        return candidate.patch
    key = f"labels:patch:{candidate.pk}:{context}"
    shown = cache.get(key)
    if shown is None:
        paths = [f.path for f in (patch_files(candidate.patch, split=False) or [])]
        try:
            files = files_at_commits(candidate.task, paths, (task_base_sha(candidate.task),))
        except (GitError, OSError):
            return candidate.patch
        shown = patch_with_context(candidate.patch, {path: texts[0] for path, texts in files.items()},
                                   CONTEXT_LINES[context])
        cache.set(key, shown, 3600)
    return shown


def _item_context(request, dataset: Dataset, candidate: Candidate, *, form: dict | None = None) -> dict:
    """What the annotator sees: the issue, the patch, maybe the trajectory; never who made it, its
    grade, the verifiers' scores or anyone else's label."""
    label_settings = selectors.dataset_label_settings(dataset)
    context_lines = request.GET.get("lines") if request.GET.get("lines") in CONTEXT_LINES else "3"
    hold = services.label_hold_of(dataset=dataset, candidate=candidate, user=request.user)
    return {
        "dataset": dataset, "candidate_id": candidate.pk, "task_id": candidate.task.instance_id,
        "issue": current_issue(list(candidate.task.issue_versions.all())),
        "files": patch_files(patch_shown(candidate, context_lines), split=False),
        "context_lines": context_lines, "context_choices": CONTEXT_CHOICES,
        # Controls have no trajectory: with controls mixed in, a trajectory would mark an agent's patch.
        "trajectory": [] if label_settings.hide_trajectory or label_settings.control_share else candidate.trajectory,
        "hold": hold, "hold_expired": bool(hold and hold.expires_at <= timezone.now()),
        "verdicts": Verdict.choices, "form": form or {},
        "mine": Label.objects.filter(candidate=candidate, annotator=request.user).first(),
        "labelled": Label.objects.filter(dataset=dataset, annotator=request.user).count(),
    }


def _posted(request, name: str, limit: int = services.RATIONALE_CHARS + 1) -> str:
    return request.POST.get(name, "").replace("\x00", "")[:limit]


def _pinned_lines(text: str, patch: str) -> tuple:
    """`path:line` pins, one per line or comma, as [{path, line}]: each a line the patch shows (a file
    it changes, a line number inside one of its hunks, old or new side); anything else is refused."""
    try:
        shown = {changed.path: changed for changed in PatchSet(patch)}
    except UnidiffParseError:
        shown = {}
    pins = []
    for part in text.replace(",", "\n").splitlines():
        part = part.strip()
        if not part:
            continue
        path, _, line = part.rpartition(":")
        if not path or not line.isdecimal():
            raise services.LabelRefused(f"“{part}” is not a line of the diff: write it as path:line.")
        if path not in shown:
            raise services.LabelRefused(f"“{part}”: the patch does not change {path}.")
        if not any(hunk.source_start <= int(line) < hunk.source_start + max(hunk.source_length, 1)
                   or hunk.target_start <= int(line) < hunk.target_start + max(hunk.target_length, 1)
                   for hunk in shown[path]):
            raise services.LabelRefused(f"“{part}”: line {line} of {path} is not in the diff.")
        pins.append({"path": path, "line": int(line)})
    return tuple(pins)


def item(request, pk: int, candidate_id: int):
    """One item to label (GET), or its label (POST; then the next item)."""
    _require_labeller(request)
    dataset = _dataset_seen(request, pk)
    candidate = _candidate_seen(request, dataset, candidate_id)
    if request.method != "POST":
        return render(request, "labels/item.html", _item_context(request, dataset, candidate))
    posted = {"verdict": _posted(request, "verdict", 16), "confidence": _posted(request, "confidence", 4),
              "rationale": _posted(request, "rationale"), "lines": _posted(request, "lines", 2000)}
    try:
        confidence = int(posted["confidence"]) if posted["confidence"].isdecimal() else None
        services.label_submit(dataset=dataset, candidate=candidate, user=request.user, form=services.LabelForm(
            verdict=posted["verdict"], confidence=confidence, rationale=posted["rationale"],
            lines=_pinned_lines(posted["lines"], candidate.patch)))
    except services.LabelRefused as refusal:
        context = _item_context(request, dataset, candidate, form=posted)
        context["refusal"] = str(refusal)
        return render(request, "labels/item.html", context, status=400)
    messages.success(request, "Label saved.")
    return redirect("labels:next", pk=dataset.pk)


# --- a curator's views ----------------------------------------------------------------------------


def candidate_unblinded(request, pk: int, candidate_id: int):
    """Everything about a labelled candidate, for curators: who made it, its grade, the verifiers'
    scores and every label with its rationale."""
    require_reviewer(request, "Only curators and admins see a candidate unblinded.")
    dataset = _dataset_seen(request, pk)
    candidate = _candidate_seen(request, dataset, candidate_id)
    return render(request, "labels/unblinded.html", {
        "dataset": dataset, "candidate": candidate, "task": candidate.task,
        "files": patch_files(candidate.patch, split=False),
        "judge_scores": JudgeScore.objects.filter(candidate=candidate).order_by("mode", "-created_at"),
        "execution": (Execution.objects.filter(candidate=candidate, job__state="succeeded")
                      .order_by("-created_at", "-id").first()),
        "scores": selectors.verifier_scores([candidate.pk])[candidate.pk],
        "labels": Label.objects.filter(candidate=candidate).select_related("annotator").order_by("created_at"),
        "settlements": Settlement.objects.filter(candidate=candidate).select_related("settled_by"),
        "final": services.candidate_final_label(candidate),
        "verdicts": Verdict.choices, "judge_modes": JUDGE_MODES,
    })


@require_POST
def settle(request, pk: int, candidate_id: int):
    """A curator sets the final label of a candidate whose annotators disagree."""
    require_reviewer(request, "Only curators and admins settle a disagreement.")
    dataset = _dataset_seen(request, pk)
    candidate = _candidate_seen(request, dataset, candidate_id)
    try:
        services.label_settle(candidate=candidate, user=request.user, verdict=_posted(request, "verdict", 16),
                              note=_posted(request, "note"))
    except services.LabelRefused as refusal:
        messages.error(request, str(refusal))
        return redirect("labels:candidate", pk=dataset.pk, candidate_id=candidate.pk)
    messages.success(request, f"Candidate {candidate.pk} settled.")
    return redirect(reverse("labels:dataset", args=[dataset.pk]) + "#settle")


@require_POST
def settings_save(request, pk: int):
    dataset = _dataset_seen(request, pk)
    try:
        overlap = int(_posted(request, "overlap", 4)) if _posted(request, "overlap", 4).isdecimal() else 0
        try:
            control_share = float(_posted(request, "control_share", 10) or 0) / 100
        except ValueError:
            raise services.LabelRefused("Give the share of hidden controls as a percentage.") from None
        services.label_settings_save(dataset=dataset, user=request.user, overlap=overlap, control_share=control_share,
                                     order=_posted(request, "order", 16),
                                     hide_trajectory=request.POST.get("hide_trajectory") == "1")
    except services.LabelRefused as refusal:
        messages.error(request, str(refusal))
    else:
        messages.success(request, "Labelling settings saved; the queue follows them.")
    return redirect("labels:dataset", pk=dataset.pk)


# --- a dataset's labels page ----------------------------------------------------------------------

PAIRS_SHOWN = 50  # Cohen's kappas on the page: 50 annotators make 1,225 pairs; the rest on asking


def _pairs_shown(cohens: list, *, every: bool) -> dict:
    """The pairs of annotators who share the most items first; all of them when asked."""
    ranked = sorted(cohens, key=lambda pair: -pair[2].items)
    return {"shown": ranked if every else ranked[:PAIRS_SHOWN], "count": len(ranked)}


def dataset_labels(request, pk: int):
    """Agreement, what a curator settles, people against the tests and the verifiers, the oracle's
    error rate, controls and progress."""
    dataset = _dataset_seen(request, pk)
    label_settings = selectors.dataset_label_settings(dataset)
    if not user_can_review(request.user):  # others' labels and the grades stay out of an annotator's sight
        _require_labeller(request)
        services.label_queue_refresh(dataset)  # what waits for them, counted on the queue as it is now
        return render(request, "labels/annotator_home.html", {
            "dataset": dataset, "labelled": Label.objects.filter(dataset=dataset, annotator=request.user).count(),
            "open": services.queue_items_open(dataset, user=request.user).count()})
    figures = selectors.dataset_label_figures(dataset, user=request.user, label_settings=label_settings)
    return render(request, "labels/dataset_labels.html", {
        "dataset": dataset, "settings": label_settings, "orders": QueueOrder.choices,
        "uniform": label_settings.order == RANDOM, **figures,
        "rows": Paginator(figures["rows"], ROWS_PER_PAGE).get_page(request.GET.get("page")),
        "pairs": _pairs_shown(figures["agreement"].cohens, every=request.GET.get("pairs") == "all"),
        "as_of": datetime.fromtimestamp(figures["as_of"], tz=dt_timezone.utc),
        "can_curate": user_can_review(request.user), "can_label": bool(user_roles(request.user)),
        "verdicts": Verdict.choices,
    })
