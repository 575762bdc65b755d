"""Repositories and their mined commits in the API: the same checks, refusals and roles as the
repository pages, through the same services."""

from django.shortcuts import get_object_or_404
from django.urls import path, reverse
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.api import (CONFLICT, ApiRefused, JobStartedSerializer, ReadOrMine, StrictSerializer, api_urlpatterns,
                      form_checked, job_accepted)
from worker.engine.reasons import MINING_DROP_REASONS

from . import selectors, services
from .forms import RepositoryFiltersForm, RepositoryRegisterForm
from .models import Commit, MiningJob, Repository


class RepositorySerializer(serializers.ModelSerializer):
    url = serializers.HyperlinkedIdentityField(view_name="api:repository")
    page = serializers.SerializerMethodField()
    location = serializers.CharField(source="url", help_text="URL or local path, without credentials.")
    allowed_groups = serializers.SlugRelatedField(slug_field="name", many=True, read_only=True)
    commits = serializers.HyperlinkedIdentityField(view_name="api:commits")

    class Meta:
        model = Repository
        fields = ["id", "url", "page", "name", "location", "default_branch", "mined_head", "max_files", "max_lines",
                  "max_patch_chars", "test_file_globs", "test_dir_names", "allowed_groups", "created_at", "commits"]
        read_only_fields = fields

    def get_page(self, repository) -> str:
        return reverse("repositories:detail", args=[repository.pk])


class RepositoryRegisterSerializer(StrictSerializer):
    location = serializers.CharField(max_length=1000, help_text="A URL or a local path; a token in the URL is "
                                                                "stored as a secret.")
    name = serializers.CharField(max_length=200, required=False, allow_blank=True,
                                 help_text="owner/name; empty: taken from the location.")
    ssh_key = serializers.CharField(required=False, allow_blank=True, trim_whitespace=False, write_only=True)
    allowed_groups = serializers.ListField(child=serializers.IntegerField(), required=False,
                                           help_text="Group ids; empty: everyone who can log in sees it.")


class RegisteredSerializer(serializers.Serializer):
    repository = RepositorySerializer()
    warning = serializers.CharField(allow_blank=True)
    mining = JobStartedSerializer()


class FiltersSerializer(StrictSerializer):
    max_files = serializers.IntegerField(min_value=0)
    max_lines = serializers.IntegerField(min_value=0)
    max_patch_chars = serializers.IntegerField(min_value=0)
    test_file_globs = serializers.ListField(child=serializers.CharField())
    test_dir_names = serializers.ListField(child=serializers.CharField())


class CommitSerializer(serializers.ModelSerializer):
    url = serializers.SerializerMethodField()
    kept = serializers.SerializerMethodField()
    kept_by = serializers.SlugRelatedField(slug_field="username", read_only=True, allow_null=True)

    class Meta:
        model = Commit
        fields = ["id", "url", "sha", "parent_sha", "author_name", "authored_at", "committed_at", "message",
                  "source_file_count", "test_file_count", "other_file_count", "lines_added", "lines_deleted",
                  "patch_chars", "python_change", "tests_changed", "kept", "drop_reason", "kept_by", "kept_note",
                  "kept_reason", "kept_at"]
        read_only_fields = fields

    def get_url(self, commit) -> str:
        return self.context["request"].build_absolute_uri(
            reverse("api:commit", args=[commit.repository_id, commit.sha]))

    def get_kept(self, commit) -> bool:
        return not commit.drop_reason


class CommitDetailSerializer(CommitSerializer):
    class Meta(CommitSerializer.Meta):
        fields = CommitSerializer.Meta.fields + ["source_files", "test_files", "other_files"]
        read_only_fields = fields


class KeepSerializer(StrictSerializer):
    note = serializers.CharField(help_text="Why it is kept, for the next person.")


def _visible(request, pk: int) -> Repository:
    return get_object_or_404(selectors.repositories_visible(user=request.user), pk=pk)


def _mining_started(request, job: MiningJob, created: bool) -> Response:
    return job_accepted(request, job.job, created=created,
                        page_url=reverse("repositories:detail", args=[job.repository_id]))


@extend_schema(parameters=[OpenApiParameter("q", str, description="Words of the name or location.")])
class RepositoryList(generics.ListAPIView):
    """Repositories you may see; POST registers one and starts its first mining (curators)."""

    serializer_class = RepositorySerializer
    permission_classes = [ReadOrMine]

    def get_queryset(self):
        text = self.request.query_params.get("q", "")[:200]
        return selectors.repositories_listed(user=self.request.user, text=text).prefetch_related("allowed_groups")

    @extend_schema(request=RepositoryRegisterSerializer, responses={201: RegisteredSerializer})
    def post(self, request):
        data = RepositoryRegisterSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = dict(data.validated_data)
        form = RepositoryRegisterForm({**values, "allowed_groups": values.get("allowed_groups", [])},
                                      user=request.user)
        form_checked(form)
        repository = form.register()
        if repository is None:
            form_checked(form)
        job, created = services.mining_job_start(repository=repository, user=request.user)
        started = _mining_started(request, job, created).data
        body = {"repository": RepositorySerializer(repository, context={"request": request}).data,
                "warning": repository.registration_warning or "", "mining": started}
        return Response(body, status=status.HTTP_201_CREATED,
                        headers={"Location": body["repository"]["url"]})


class RepositoryDetail(generics.RetrieveDestroyAPIView):
    """One repository; DELETE removes it with its commits, tasks, jobs and mirror (curators)."""

    serializer_class = RepositorySerializer
    permission_classes = [ReadOrMine]

    def get_queryset(self):
        return selectors.repositories_visible(user=self.request.user).prefetch_related("allowed_groups")

    def perform_destroy(self, repository):
        services.repository_delete(repository=repository)


class RepositoryMine(APIView):
    permission_classes = [ReadOrMine]

    @extend_schema(request=None, responses={202: JobStartedSerializer})
    def post(self, request, pk: int):
        """Mine new commits: the mining job, or the one already queued or running."""
        job, created = services.mining_job_start(repository=_visible(request, pk), user=request.user)
        return _mining_started(request, job, created)


class RepositoryFilters(APIView):
    permission_classes = [ReadOrMine]

    @extend_schema(request=FiltersSerializer, responses={202: JobStartedSerializer, **CONFLICT})
    def put(self, request, pk: int):
        """Change the mining filters and start the job that applies them: new limits are applied to the
        stored commits; new test-file rules measure every commit again."""
        repository = _visible(request, pk)
        data = FiltersSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = {**data.validated_data, "test_file_globs": ",".join(data.validated_data["test_file_globs"]),
                  "test_dir_names": ",".join(data.validated_data["test_dir_names"])}
        cleaned = form_checked(RepositoryFiltersForm(values))
        try:
            job = services.repository_filters_update(repository=repository, user=request.user, **cleaned)
        except services.RepositoryBusy as busy:
            raise ApiRefused(str(busy), code="repository_busy", status_code=409)
        return _mining_started(request, job, True)


COMMIT_FILTERS = [
    OpenApiParameter("status", str, enum=["kept", "dropped", *MINING_DROP_REASONS],
                     description="kept, dropped, or the reason a filter dropped it."),
    OpenApiParameter("since", str, description="Committed on or after this date (YYYY-MM-DD)."),
    OpenApiParameter("until", str, description="Committed on or before this date (YYYY-MM-DD)."),
    OpenApiParameter("q", str, description="Words of the message or author, or the start of the sha."),
]


class CommitQuery(StrictSerializer):
    status = serializers.ChoiceField(choices=["", "kept", "dropped", *MINING_DROP_REASONS], required=False)
    since = serializers.DateField(required=False)
    until = serializers.DateField(required=False)
    q = serializers.CharField(required=False, max_length=200)
    cursor = serializers.CharField(required=False)
    page_size = serializers.IntegerField(required=False)


@extend_schema(parameters=COMMIT_FILTERS)
class CommitList(generics.ListAPIView):
    """A repository's mined commits, newest mined first, with the reason each dropped one was dropped."""

    serializer_class = CommitSerializer

    def get_queryset(self):
        repository = _visible(self.request, self.kwargs["pk"])
        query = CommitQuery(data=self.request.query_params.dict())
        query.is_valid(raise_exception=True)
        asked = query.validated_data
        return selectors.commits_filtered(repository=repository, status=asked.get("status", ""),
                                          since=asked.get("since"), until=asked.get("until"),
                                          text=asked.get("q", "")).prefetch_related(None).select_related("kept_by")


class CommitDetail(generics.RetrieveAPIView):
    serializer_class = CommitDetailSerializer

    def get_object(self):
        repository = _visible(self.request, self.kwargs["pk"])
        return get_object_or_404(Commit.objects.select_related("kept_by"), repository=repository,
                                 sha=self.kwargs["sha"])


class CommitKeep(APIView):
    permission_classes = [ReadOrMine]

    @extend_schema(request=KeepSerializer, responses={200: CommitDetailSerializer, **CONFLICT})
    def post(self, request, pk: int, sha: str):
        """Keep a commit a filter dropped, saying why: it gets a task, and filters applied again keep it."""
        repository = _visible(request, pk)
        commit = get_object_or_404(Commit, repository=repository, sha=sha)
        data = KeepSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            commit = services.commit_keep(commit=commit, user=request.user, note=data.validated_data["note"])
        except services.CommitNotKept as refused:
            raise ApiRefused(f"Not kept: {refused}.", code="not_kept", status_code=409)
        return Response(CommitDetailSerializer(commit, context={"request": request}).data)


urlpatterns = api_urlpatterns([
    path("repositories/", RepositoryList.as_view(), name="repositories"),
    path("repositories/<int:pk>/", RepositoryDetail.as_view(), name="repository"),
    path("repositories/<int:pk>/mine/", RepositoryMine.as_view(), name="repository_mine"),
    path("repositories/<int:pk>/filters/", RepositoryFilters.as_view(), name="repository_filters"),
    path("repositories/<int:pk>/commits/", CommitList.as_view(), name="commits"),
    path("repositories/<int:pk>/commits/<str:sha>/", CommitDetail.as_view(), name="commit"),
    path("repositories/<int:pk>/commits/<str:sha>/keep/", CommitKeep.as_view(), name="commit_keep"),
])
