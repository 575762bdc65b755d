"""Jobs in the API: list (the jobs page's filters), read with progress, cancel, retry; the same
visibility and roles as the jobs page."""

from django.shortcuts import get_object_or_404
from django.urls import path
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.api import CONFLICT, ApiRefused, JobStartedSerializer, ReadOrMine, api_urlpatterns, job_accepted

from . import selectors
from .models import Job
from .registry import job_kind
from .services import JobRefused, job_cancel, job_retry


def _page_of(job: Job) -> str:
    try:
        kind = job_kind(job.kind)
    except LookupError:
        return ""
    return kind.link(job) if kind.link else ""


class JobSerializer(serializers.ModelSerializer):
    url = serializers.HyperlinkedIdentityField(view_name="api:job")
    page = serializers.SerializerMethodField(help_text="Where the pages show what it makes, if anywhere.")
    requested_by = serializers.SlugRelatedField(slug_field="username", read_only=True, allow_null=True)
    error_sentence = serializers.CharField(read_only=True, help_text="The error code, in words.")
    elapsed_seconds = serializers.SerializerMethodField()

    class Meta:
        model = Job
        fields = ["id", "url", "page", "kind", "state", "subject_type", "subject_id", "subject_label",
                  "requested_by", "cancel_requested", "progress_done", "progress_total", "error_code",
                  "error_sentence", "error_message", "created_at", "started_at", "finished_at",
                  "elapsed_seconds"]
        read_only_fields = fields

    def get_page(self, job) -> str:
        return _page_of(job)

    def get_elapsed_seconds(self, job) -> float | None:
        return selectors.job_elapsed_seconds(job)


FILTERS = [OpenApiParameter("kind", str, description="A job kind, e.g. mining, validation, grading."),
           OpenApiParameter("state", str, enum=[state for state, _ in Job.State.choices]),
           OpenApiParameter("subject", str, description="app_label.model:id, or words of the subject's label.")]


@extend_schema(parameters=FILTERS, responses={200: JobSerializer(many=True)})
class JobList(generics.ListAPIView):
    serializer_class = JobSerializer

    def get_queryset(self):
        filters = {name: self.request.query_params.get(name, "").strip()[:200] for name in ("kind", "state", "subject")}
        return selectors.jobs_filtered(user=self.request.user, **filters)


class JobDetail(generics.RetrieveAPIView):
    serializer_class = JobSerializer

    def get_queryset(self):
        return selectors.jobs_visible(user=self.request.user)


def _visible_job(request, pk: int) -> Job:
    return get_object_or_404(selectors.jobs_visible(user=request.user), pk=pk)


class JobCancel(APIView):
    permission_classes = [ReadOrMine]

    @extend_schema(request=None, responses={200: JobSerializer, **CONFLICT})
    def post(self, request, pk: int):
        """Ask a queued or running job to stop: a queued job at once, a running one at its next report."""
        job = _visible_job(request, pk)
        try:
            job_cancel(job=job, user=request.user)
        except JobRefused as refused:
            raise ApiRefused(str(refused), code="not_cancellable", status_code=409)
        job.refresh_from_db()
        return Response(JobSerializer(job, context={"request": request}).data)


class JobRetry(APIView):
    permission_classes = [ReadOrMine]

    @extend_schema(request=None, responses={202: JobStartedSerializer, **CONFLICT})
    def post(self, request, pk: int):
        """A new job doing what a failed or cancelled one was for."""
        job = _visible_job(request, pk)
        try:
            again = job_retry(job=job, user=request.user)
        except JobRefused as refused:
            raise ApiRefused(str(refused), code="not_retryable", status_code=409)
        return job_accepted(request, again, created=again.pk != job.pk, page_url=_page_of(again))


urlpatterns = api_urlpatterns([
    path("jobs/", JobList.as_view(), name="jobs"),
    path("jobs/<int:pk>/", JobDetail.as_view(), name="job"),
    path("jobs/<int:pk>/cancel/", JobCancel.as_view(), name="job_cancel"),
    path("jobs/<int:pk>/retry/", JobRetry.as_view(), name="job_retry"),
])
