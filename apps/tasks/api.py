"""Tasks in the API: the task list's filters and sorts, a task with its oracle, runs, issue versions,
reviews and history, and what people do to one (validate, review) or to many (bulk actions); the
same roles, refusals and services as the task pages."""

from django.db.models import F, Value
from django.db.models.functions import Coalesce
from django.shortcuts import get_object_or_404
from django.urls import path, reverse
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field
from rest_framework import generics, serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.api import (CONFLICT, ApiRefused, JobStartedSerializer, NewestFirst, ReadOrMine, ReadOrReview,
                      StrictSerializer, api_urlpatterns, job_accepted)

from apps.jobs.models import Job
from apps.llm.models import LanguageJob

from . import review, selectors, services
from .bulk import bulk_action_start
from .forms import VERDICTS, YES_NO
from .history import task_history, task_reviews
from .language_jobs import language_job_start
from .models import BulkAction, IssueVersion, Review, Task, TestRunRecord, Validation
from .states import VALID_OR_LATER

# Sorts as the task list names them: each orders by a field the cursor can hold (missing scores last).
SORTS = {
    "-updated": ("-updated_at", "-id"), "updated": ("updated_at", "id"), "-created": ("-created_at", "-id"),
    "-f2p": ("-fail_to_pass_count", "-id"), "f2p": ("fail_to_pass_count", "id"), "id": ("instance_id",),
    "-leak": ("-leak_sort", "-id"), "-underspecified": ("-underspecified_sort", "-id"),
    "-false_negative": ("-false_negative_sort", "-id"),
}
PAGING = ("cursor", "page_size")


class TaskQuery(StrictSerializer):
    """The task list's filters, by the names its page uses."""

    q = serializers.CharField(required=False, max_length=200, help_text="Words of the task id or commit message.")
    repository = serializers.IntegerField(required=False)
    state = serializers.ChoiceField(choices=Task.State.choices, required=False)
    verdict = serializers.ChoiceField(choices=VERDICTS[1:], required=False)
    reason = serializers.CharField(required=False, max_length=64)
    flaky = serializers.ChoiceField(choices=YES_NO[1:], required=False)
    leak = serializers.ChoiceField(choices=["flagged", "clear"], required=False)
    f2p_min = serializers.IntegerField(required=False, min_value=0)
    f2p_max = serializers.IntegerField(required=False, min_value=0)
    generated = serializers.ChoiceField(choices=YES_NO[1:], required=False)
    reviewer = serializers.IntegerField(required=False)
    underspecified_min = serializers.IntegerField(required=False, min_value=0, max_value=3)
    false_negative_min = serializers.IntegerField(required=False, min_value=0, max_value=3)
    disagree = serializers.ChoiceField(choices=YES_NO[1:], required=False)
    mutation_max = serializers.FloatField(required=False, min_value=0, max_value=1)
    sort = serializers.ChoiceField(choices=list(SORTS), required=False)
    cursor = serializers.CharField(required=False)
    page_size = serializers.IntegerField(required=False, min_value=1)


class TaskCursor(NewestFirst):
    """The cursor follows the sort asked for."""

    def get_ordering(self, request, queryset, view):
        return SORTS[request.query_params.get("sort") or "-updated"]


class TaskSerializer(serializers.ModelSerializer):
    url = serializers.SerializerMethodField()
    page = serializers.SerializerMethodField()
    repository = serializers.SlugRelatedField(slug_field="name", read_only=True)
    commit = serializers.SlugRelatedField(slug_field="sha", read_only=True)

    class Meta:
        model = Task
        fields = ["id", "instance_id", "url", "page", "source", "repository", "commit", "state", "reason", "verdict",
                  "fail_to_pass_count", "flaky_count", "has_generated_tests", "leak_score", "review_count",
                  "underspecified", "false_negative", "disagree", "mutation_score", "created_at", "updated_at"]
        read_only_fields = fields

    def get_url(self, task) -> str:
        return self.context["request"].build_absolute_uri(reverse("api:task", args=[task.instance_id]))

    def get_page(self, task) -> str:
        return reverse("tasks:detail", args=[task.instance_id])


class RunSerializer(serializers.ModelSerializer):
    class Meta:
        model = TestRunRecord
        fields = ["side", "scope", "index", "status", "exit_code", "collection_error", "seconds", "outcomes",
                  "untrusted"]
        read_only_fields = fields


class ValidationSerializer(serializers.ModelSerializer):
    state = serializers.CharField(source="job.state", read_only=True, allow_null=True, default=None)
    runs = RunSerializer(many=True, read_only=True)

    class Meta:
        model = Validation
        fields = ["id", "state", "verdict", "reason", "backend", "environment_id", "fail_to_pass", "pass_to_pass",
                  "flaky", "breaks", "seconds", "created_at", "runs"]
        read_only_fields = fields


class IssueVersionSerializer(serializers.ModelSerializer):
    class Meta:
        model = IssueVersion
        fields = ["number", "author", "text", "leak_score", "problems", "created_at"]
        read_only_fields = fields


class ReviewSerializer(serializers.ModelSerializer):
    reviewer = serializers.SlugRelatedField(slug_field="username", read_only=True)
    in_words = serializers.CharField(read_only=True)
    difficulty = serializers.ChoiceField(choices=Review.DIFFICULTY_CHOICES, allow_blank=True, read_only=True)

    class Meta:
        model = Review
        fields = ["reviewer", "decision", "in_words", "underspecified", "false_negative", "difficulty",
                  "other_problems", "reject_reason", "note", "current", "settles", "created_at"]
        read_only_fields = fields


class HistorySerializer(serializers.Serializer):
    at = serializers.DateTimeField()
    actor = serializers.SerializerMethodField(help_text="Who did it; null for commitgym itself.")
    what = serializers.CharField()
    detail = serializers.CharField(allow_blank=True)

    def get_actor(self, row) -> str | None:
        return row.actor.username if row.actor else None


class TaskDetailSerializer(TaskSerializer):
    oracle = serializers.SerializerMethodField(help_text="The latest validation, with its runs.")
    issue_versions = IssueVersionSerializer(many=True, read_only=True)
    reviews = serializers.SerializerMethodField()
    history = serializers.SerializerMethodField()

    class Meta(TaskSerializer.Meta):
        fields = TaskSerializer.Meta.fields + ["excluded_tests", "oracle", "issue_versions", "reviews", "history"]
        read_only_fields = fields

    @extend_schema_field(ValidationSerializer(allow_null=True))
    def get_oracle(self, task):
        latest = (Validation.objects.filter(task=task).select_related("job").prefetch_related("runs")
                  .defer("runs__output").order_by("-created_at", "-id").first())
        return ValidationSerializer(latest).data if latest else None

    @extend_schema_field(ReviewSerializer(many=True))
    def get_reviews(self, task):
        rows = task_reviews(task)
        for row in rows:
            row.review.in_words = row.decision + (f"; {row.scores}" if row.scores else "")
        return ReviewSerializer([row.review for row in rows], many=True).data

    @extend_schema_field(HistorySerializer(many=True))
    def get_history(self, task):
        return HistorySerializer(task_history(task), many=True).data


def _visible_task(request, instance_id: str) -> Task:
    return get_object_or_404(selectors.tasks_visible(user=request.user).select_related("repository", "commit"),
                             instance_id=instance_id)


@extend_schema(parameters=[OpenApiParameter(name, str, required=False) for name in TaskQuery().fields
                           if name not in PAGING])
class TaskList(generics.ListAPIView):
    """Tasks you may see, with the task list's filters (`state`, `verdict`, `repository`, …) and sorts."""

    serializer_class = TaskSerializer
    pagination_class = TaskCursor

    def get_queryset(self):
        query = TaskQuery(data=self.request.query_params.dict())
        query.is_valid(raise_exception=True)
        filters = {name: value for name, value in query.validated_data.items() if name not in PAGING}
        sort = filters.pop("sort", "-updated")
        tasks = selectors.tasks_filtered(user=self.request.user, sort=sort, **filters)
        return tasks.select_related("repository", "commit").annotate(
            leak_sort=Coalesce(F("leak_score"), Value(-1.0)),
            underspecified_sort=Coalesce(F("underspecified"), Value(-1)),
            false_negative_sort=Coalesce(F("false_negative"), Value(-1)))


class TaskDetail(generics.RetrieveAPIView):
    """A task with its oracle (the latest validation and its runs; logs stay on the pages), its issue
    versions, reviews and history."""

    serializer_class = TaskDetailSerializer
    lookup_field = "instance_id"

    def get_queryset(self):
        return (selectors.tasks_visible(user=self.request.user).select_related("repository", "commit")
                .prefetch_related("issue_versions"))


class TaskValidate(APIView):
    permission_classes = [ReadOrMine]

    @extend_schema(request=None, responses={202: JobStartedSerializer, **CONFLICT})
    def post(self, request, instance_id: str):
        """Validate the task again: its validation job, or the one already queued or running."""
        task = _visible_task(request, instance_id)
        if task.imported:
            raise ApiRefused(f"{task.instance_id} is an imported instance: its oracle is the one imported, and it "
                             "is not validated here.", code="imported_instance", status_code=409)
        page = reverse("tasks:detail", args=[task.instance_id])
        validation = services.task_validation_start(task=task, actor=request.user)
        if validation is not None:
            return job_accepted(request, validation.job, created=True, page_url=page)
        under_way = Job.objects.filter(kind="validation", subject_type="tasks.task", subject_id=task.pk,
                                       state__in=Job.ACTIVE_STATES).first()
        if under_way is not None:
            return job_accepted(request, under_way, created=False, page_url=page)
        task.refresh_from_db(fields=["state"])
        raise ApiRefused(f"{task.instance_id} is {task.get_state_display().lower()}: it cannot be validated now.",
                         code="not_validatable", status_code=409)


class IssueRequest(StrictSerializer):
    regenerate = serializers.BooleanField(default=False, help_text="Ask the model again rather than reuse the "
                                                                   "recorded answer.")


class TaskWriteIssue(APIView):
    permission_classes = [ReadOrMine]

    @extend_schema(request=IssueRequest, responses={202: JobStartedSerializer, **CONFLICT})
    def post(self, request, instance_id: str):
        """Have the issue writer write the task's issue (a valid task): its job, or the one under way."""
        task = _visible_task(request, instance_id)
        if task.state not in VALID_OR_LATER:
            raise ApiRefused(f"{task.instance_id} is {task.get_state_display().lower()}: issues are written for "
                             "valid tasks.", code="not_valid", status_code=409)
        data = IssueRequest(data=request.data)
        data.is_valid(raise_exception=True)
        under_way = Job.objects.filter(kind=LanguageJob.Kind.BACKTRANSLATE, subject_type="tasks.task",
                                       subject_id=task.pk, state__in=Job.ACTIVE_STATES).exists()
        written = language_job_start(task=task, kind=LanguageJob.Kind.BACKTRANSLATE, user=request.user,
                                     regenerate=data.validated_data["regenerate"])
        return job_accepted(request, written.job, created=not under_way,
                            page_url=reverse("tasks:detail", args=[task.instance_id]))


class ReviewRequest(StrictSerializer):
    decision = serializers.ChoiceField(choices=Review.Decision.values)
    underspecified = serializers.ChoiceField(choices=Review.SCORES, required=False,
                                             allow_null=True)
    false_negative = serializers.ChoiceField(choices=Review.SCORES, required=False,
                                             allow_null=True)
    difficulty = serializers.ChoiceField(choices=[value for value, _ in Review.DIFFICULTY_CHOICES], required=False,
                                         allow_blank=True)
    other_problems = serializers.CharField(required=False, allow_blank=True)
    reject_reason = serializers.CharField(required=False, allow_blank=True, max_length=64)
    note = serializers.CharField(required=False, allow_blank=True)
    settle = serializers.BooleanField(required=False, default=False)


class ReviewOutcome(serializers.Serializer):
    outcome = serializers.ChoiceField(choices=["accepted", "rejected", "pending", "failing"])
    task = TaskSerializer()


class TaskReview(APIView):
    permission_classes = [ReadOrReview]

    @extend_schema(request=ReviewRequest, responses={200: ReviewOutcome, **CONFLICT})
    def post(self, request, instance_id: str):
        """Accept (with the whole rubric) or reject (with a reason), as on the review page; `settle` is a
        curator's last word on a disagreement."""
        task = _visible_task(request, instance_id)
        data = ReviewRequest(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            outcome = review.task_review_submit(task=task, user=request.user, form=review.ReviewForm(**data.validated_data))
        except review.ReviewRefused as refused:
            raise ApiRefused(str(refused), code="review_refused", status_code=409)
        task.refresh_from_db()
        return Response({"outcome": outcome, "task": TaskSerializer(task, context={"request": request}).data})


class BulkRequest(StrictSerializer):
    action = serializers.ChoiceField(choices=BulkAction.Action.values)
    filters = TaskQuery(required=False, help_text="The task list's filters: the tasks the action is for.")
    expected = serializers.IntegerField(min_value=0, help_text="How many tasks you expect it to touch: refused "
                                                                "if the filters now match another number.")
    reject_reason = serializers.CharField(required=False, allow_blank=True, max_length=64)
    note = serializers.CharField(required=False, allow_blank=True)


class TaskBulk(APIView):
    permission_classes = [ReadOrReview]

    @extend_schema(request=BulkRequest, responses={202: JobStartedSerializer, **CONFLICT})
    def post(self, request):
        """One action (reject, reopen, validate, write issues, generate tests) on every task the filters
        match, as a job; refused when they match another number of tasks than `expected`."""
        data = BulkRequest(data=request.data)
        data.is_valid(raise_exception=True)
        asked = data.validated_data
        filters = {name: value for name, value in asked.get("filters", {}).items() if name not in PAGING}
        filters.pop("sort", None)
        try:
            bulk = bulk_action_start(user=request.user, action=asked["action"], filters=filters, query="api",
                                     expected=asked["expected"], reject_reason=asked.get("reject_reason", ""),
                                     note=asked.get("note", ""))
        except review.ReviewRefused as refused:
            raise ApiRefused(str(refused), code="bulk_refused", status_code=409)
        return job_accepted(request, bulk.job, created=True, page_url=reverse("tasks:bulk", args=[bulk.pk]))


urlpatterns = api_urlpatterns([
    path("tasks/", TaskList.as_view(), name="tasks"),
    path("tasks/bulk/", TaskBulk.as_view(), name="tasks_bulk"),
    path("tasks/<str:instance_id>/", TaskDetail.as_view(), name="task"),
    path("tasks/<str:instance_id>/validate/", TaskValidate.as_view(), name="task_validate"),
    path("tasks/<str:instance_id>/review/", TaskReview.as_view(), name="task_review"),
    path("tasks/<str:instance_id>/issue/", TaskWriteIssue.as_view(), name="task_issue"),
])
