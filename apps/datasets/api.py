"""Datasets in the API: datasets and their measures as JSON, candidates with their ground truth,
judge scores, execution results and flags; grading, verifying, mutants and samples started as jobs;
files uploaded, or named where they lie on the server, to import.
Grades, scores and who made a candidate are for curators and admins, as on the pages (annotators
label blind)."""

from django.conf import settings
from django.db.models import OuterRef, Subquery
from django.http import FileResponse
from django.shortcuts import get_object_or_404
from django.urls import path, reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field
from rest_framework import generics, serializers
from rest_framework.parsers import MultiPartParser
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.accounts.roles import user_can_review
from apps.api import (
    CONFLICT,
    ApiRefused,
    ErrorSerializer,
    JobRefSerializer,
    JobStartedSerializer,
    ReadOrMine,
    ReadOrReview,
    StrictSerializer,
    Unblinded,
    api_urlpatterns,
    job_accepted,
    job_ref,
)
from apps.tasks.models import Task
from apps.tasks.selectors import tasks_visible
from worker.engine.llm.clients import ModelError
from worker.engine.sample.agent import AgentBudget
from worker.engine.verify.judge import JUDGE_MODES

from . import selectors
from .candidates.mutants import dataset_mutants_start
from .candidates.sampling import CONFIRM_ABOVE, SAMPLES_PER_TASK, dataset_sample_start, sampling_estimate_said
from .candidates.in_place import path_import_start
from .candidates.uploads import UploadRefused, upload_start
from .dataset_jobs import DatasetJobBusy
from .grading.grades import dataset_grade_start
from .models import Candidate, Dataset, Execution, JudgeScore, Release, Upload
from .releases import (
    ReleaseRefused,
    release_file_found,
    release_scope_of_dataset,
    release_start,
    release_asked_again,
    release_withdraw,
)
from .verifiers.measures import measures_cached
from .verifiers.verifying import VerifyRefused, dataset_verify_start, verification_seen


def _dataset(request, pk: int) -> tuple[Dataset, object]:
    """The dataset and its tasks the person sees; a repository's dataset with none is a 404, as on its page."""
    dataset = selectors.dataset_seen(user=request.user, pk=pk)
    if dataset is None:
        raise ApiRefused("No such dataset.", code="not_found", status_code=404)
    return dataset, selectors.dataset_tasks_visible(dataset, user=request.user)


class DatasetSerializer(serializers.Serializer):
    id = serializers.IntegerField(source="dataset.id")
    name = serializers.CharField(source="dataset.name")
    kind = serializers.CharField(source="dataset.kind")
    repository = serializers.CharField(source="dataset.repository.name", allow_null=True, default=None)
    tasks = serializers.IntegerField()
    candidates = serializers.IntegerField()
    graded = serializers.IntegerField()
    url = serializers.SerializerMethodField()
    page = serializers.SerializerMethodField()

    def get_url(self, row) -> str:
        return self.context["request"].build_absolute_uri(reverse("api:dataset", args=[row.dataset.pk]))

    def get_page(self, row) -> str:
        return reverse("datasets:detail", args=[row.dataset.pk])


class DatasetList(generics.ListAPIView):
    """Every dataset with a task you may see, with its counts (a short list: not paged)."""


    serializer_class = DatasetSerializer
    pagination_class = None

    def get_queryset(self):
        return [row for row in selectors.datasets_listed(user=self.request.user) if row.tasks]


class DatasetDetail(APIView):
    @extend_schema(responses={200: DatasetSerializer})
    def get(self, request, pk: int):
        dataset, tasks = _dataset(request, pk)
        row = selectors.DatasetRow(dataset, tasks.count(), *selectors.candidates_counted(tasks=tasks))
        return Response(DatasetSerializer(row, context={"request": request}).data)


class MeasuresSerializer(serializers.Serializer):
    tasks = serializers.IntegerField()
    candidates = serializers.IntegerField()
    resolved_candidates = serializers.IntegerField()
    ungraded = serializers.IntegerField()
    no_patch = serializers.IntegerField()
    k_max = serializers.IntegerField()
    best_at_k = serializers.DictField(child=serializers.ListField(child=serializers.FloatField(), allow_null=True),
                                      help_text="Per selector, best@k for k = 1..k_max (null: it cannot be "
                                                "measured here; `skipped` says why).")
    bands = serializers.DictField(child=serializers.ListField(child=serializers.ListField(
        child=serializers.FloatField())), help_text="Per selector, the 95% bootstrap band [low, high] per k.")
    skipped = serializers.DictField(child=serializers.CharField())
    judge = serializers.DictField(help_text="mode, model, brier, ece, uncertain, unscored.")
    distinguishing_share = serializers.FloatField(allow_null=True)
    toxic_tests = serializers.IntegerField(allow_null=True)
    complementarity = serializers.DictField(allow_null=True)
    tasks_with_candidates = serializers.IntegerField()
    scored_tasks = serializers.DictField(child=serializers.IntegerField())


class DatasetMeasures(APIView):
    permission_classes = [Unblinded]

    @extend_schema(parameters=[OpenApiParameter("mode", str, enum=list(JUDGE_MODES),
                                                description="The judge's mode (default: patch).")],
                   responses={200: MeasuresSerializer})
    def get(self, request, pk: int):
        """best@k per selector with its bands, the judge's calibration, the verifiers' complementarity and the
        toxic tests: the figures of the dataset's page, as JSON."""
        dataset, tasks = _dataset(request, pk)
        mode = request.query_params.get("mode") or JUDGE_MODES[0]
        if mode not in JUDGE_MODES:
            raise ApiRefused(f"The judge's mode is one of {', '.join(JUDGE_MODES)}.", code="invalid",
                             field="mode")
        return Response(measures_cached(tasks, judge_mode=mode).as_json())




class DatasetRunSerializer(serializers.Serializer):
    name = serializers.CharField(source="run.name")
    candidates = serializers.IntegerField(source="tasks", help_text="Its candidates on the dataset's tasks.")
    resolved = serializers.IntegerField()
    ungraded = serializers.IntegerField()
    no_patch = serializers.IntegerField()
    instances = serializers.IntegerField(help_text="What its resolved rate is over: the dataset's instances.")
    resolved_rate = serializers.FloatField(allow_null=True, help_text="Resolved over every instance, as "
                                                                      "SWE-bench counts a run; null while ungraded.")
    candidates_url = serializers.SerializerMethodField()

    def get_candidates_url(self, row) -> str:
        url = reverse("api:dataset_candidates", args=[self.context["dataset"].pk])
        return self.context["request"].build_absolute_uri(f"{url}?run={row.run.name}")


class DatasetRuns(APIView):
    permission_classes = [Unblinded]

    @extend_schema(responses={200: DatasetRunSerializer(many=True)})
    def get(self, request, pk: int):
        """The runs with candidates on the dataset's tasks, by name, each with its resolved rate, as the
        dataset's page shows them (a short list: not paged); each run's candidates on their own list."""
        dataset, tasks = _dataset(request, pk)
        rows = selectors.runs_summarised(tasks=tasks)
        return Response(DatasetRunSerializer(rows, many=True, context={"request": request, "dataset": dataset}).data)


class CandidateSerializer(serializers.ModelSerializer):
    url = serializers.SerializerMethodField()
    task = serializers.SlugRelatedField(slug_field="instance_id", read_only=True)
    run = serializers.SlugRelatedField(slug_field="name", read_only=True, allow_null=True)
    judge_p_yes = serializers.FloatField(read_only=True, allow_null=True,
                                         help_text="The judge's latest P(YES) in patch mode.")
    execution_outcome = serializers.CharField(read_only=True, allow_null=True,
                                              help_text="The execution verifier's latest result on it.")
    outcome = serializers.CharField(read_only=True, help_text="The ground truth from the hidden tests; empty while "
                                                             "ungraded.")
    hacking_review = serializers.CharField(read_only=True)

    class Meta:
        model = Candidate
        fields = ["id", "url", "task", "source", "run", "kind", "no_patch", "outcome", "graded_at", "tampering",
                  "touches_tests", "suspicious", "hacking", "hacking_review", "judge_p_yes", "execution_outcome",
                  "created_at"]
        read_only_fields = fields

    def get_url(self, candidate) -> str:
        return self.context["request"].build_absolute_uri(reverse("api:candidate", args=[candidate.pk]))


class CandidateDetailSerializer(CandidateSerializer):
    class Meta(CandidateSerializer.Meta):
        fields = CandidateSerializer.Meta.fields + ["patch", "made", "trajectory", "outcome_source", "hacking_note"]
        read_only_fields = fields


def _scored(candidates):
    """Each candidate's latest judge score and execution result, read in the same query."""
    p_yes = JudgeScore.objects.filter(candidate=OuterRef("pk"), mode=JUDGE_MODES[0]).order_by("-created_at", "-id")
    executed = Execution.objects.filter(candidate=OuterRef("pk")).exclude(outcome="").order_by("-created_at", "-id")
    return candidates.select_related("task", "run").annotate(
        judge_p_yes=Subquery(p_yes.values("p_yes")[:1]), execution_outcome=Subquery(executed.values("outcome")[:1]))


CANDIDATE_FILTERS = [
    OpenApiParameter("task", str, description="A task's instance id."),
    OpenApiParameter("run", str, description="A run's name."),
    OpenApiParameter("source", str, enum=Candidate.Source.values),
    OpenApiParameter("outcome", str, description="A ground truth (resolved, no, partial, …), or `ungraded`."),
    OpenApiParameter("suspicious", str, enum=["yes", "no"]),
]


@extend_schema(parameters=CANDIDATE_FILTERS)
class CandidateList(generics.ListAPIView):
    """A dataset's candidates with their ground truth, judge score, execution result and flags (patches
    and trajectories on each candidate's own URL)."""

    serializer_class = CandidateSerializer
    permission_classes = [Unblinded]

    def get_queryset(self):
        _, tasks = _dataset(self.request, self.kwargs["pk"])
        query = self.request.query_params
        candidates = Candidate.objects.filter(task__in=tasks).defer("patch", "trajectory", "made")
        if query.get("task"):
            candidates = candidates.filter(task__instance_id=query["task"])
        if query.get("run"):
            candidates = candidates.filter(run__name=query["run"])
        if query.get("source"):
            candidates = candidates.filter(source=query["source"])
        if query.get("outcome"):
            candidates = candidates.filter(outcome="" if query["outcome"] == "ungraded" else query["outcome"])
        if query.get("suspicious") in ("yes", "no"):
            candidates = candidates.filter(suspicious=query["suspicious"] == "yes")
        return _scored(candidates)


class CandidateDetail(generics.RetrieveAPIView):
    serializer_class = CandidateDetailSerializer
    permission_classes = [Unblinded]

    def get_queryset(self):
        return _scored(Candidate.objects.filter(task__in=tasks_visible(user=self.request.user)))


class DatasetGrade(APIView):
    permission_classes = [ReadOrMine]

    @extend_schema(request=None, responses={202: JobStartedSerializer})
    def post(self, request, pk: int):
        """Grade every candidate without a ground truth of the dataset's tasks with an oracle (imported, or
        validated valid) against its task's hidden tests: one job makes the tasks' gold and empty controls
        where missing and starts a grading job per candidate (the job already under way, if there is one)."""
        dataset, _ = _dataset(request, pk)
        job, created = dataset_grade_start(dataset=dataset, user=request.user)
        return job_accepted(request, job, created=created, page_url=reverse("datasets:detail", args=[dataset.pk]))


class VerifyRequest(StrictSerializer):
    judge_mode = serializers.ChoiceField(choices=[(mode, mode) for mode in JUDGE_MODES], default=JUDGE_MODES[0])
    judge = serializers.BooleanField(default=True, help_text="Judge the candidates the judge has not scored.")
    tests = serializers.BooleanField(default=True, help_text="Move each task's execution verifier one step on.")


class StepSerializer(serializers.Serializer):
    task = serializers.CharField()
    where = serializers.CharField(help_text="The execution verifier's step for the task when the job reached it.")
    sentence = serializers.CharField(allow_blank=True)


class VerifyingSerializer(serializers.Serializer):
    job = JobRefSerializer(allow_null=True, help_text="The latest verification's job; null before any.")
    judge_mode = serializers.CharField(allow_blank=True)
    judgings = JobRefSerializer(many=True, help_text="The judging jobs it started, one per task with unscored "
                                                     "candidates.")
    execution = StepSerializer(many=True, help_text="Where each valid task's execution verifier stood: each step "
                                                    "starts the next as it ends; verify again to start what is "
                                                    "still missing.")
    under_way = serializers.IntegerField(help_text="The verifiers' jobs queued or running on the dataset's tasks "
                                                   "now: 0 when every result there will be is in.")


class DatasetVerify(APIView):
    permission_classes = [ReadOrMine]

    @extend_schema(responses={200: VerifyingSerializer})
    def get(self, request, pk: int):
        """Where the dataset's verification stands: what its latest job started, and how many of the
        verifiers' jobs are still under way."""
        dataset, tasks = _dataset(request, pk)
        stands = verification_seen(dataset, tasks)
        return Response({**stands, "job": job_ref(request, stands["job"]) if stands["job"] else None,
                         "judgings": [job_ref(request, job) for job in stands["judgings"]]})

    @extend_schema(request=VerifyRequest, responses={202: JobStartedSerializer, **CONFLICT})
    def post(self, request, pk: int):
        """Start the verifiers' missing results for the dataset's valid tasks, as `manage.py verify` does,
        as a job: a judging per task with unscored candidates, and each task's execution verifier one
        step on. Follow it with GET on the same URL; a verification under way is returned, not a second."""
        dataset, _ = _dataset(request, pk)
        data = VerifyRequest(data=request.data)
        data.is_valid(raise_exception=True)
        asked = data.validated_data
        try:
            return _dataset_job_accepted(request, dataset, lambda: dataset_verify_start(
                dataset=dataset, user=request.user, judge_mode=asked["judge_mode"], judge=asked["judge"],
                tests=asked["tests"]))
        except VerifyRefused as refused:
            raise ApiRefused(str(refused), code="judge_unavailable", status_code=409)


def _dataset_job_accepted(request, dataset: Dataset, start) -> Response:
    """202 for the dataset job `start()` queued, or for the same one asked again while under way; 409
    when one of its kind runs as another person, or with other options, asked it."""
    try:
        row, created = start()
    except DatasetJobBusy as busy:
        raise ApiRefused(str(busy), code="job_under_way", status_code=409) from None
    return job_accepted(request, row.job, created=created, page_url=reverse("datasets:detail", args=[dataset.pk]))


class DatasetMutants(APIView):
    permission_classes = [ReadOrMine]

    @extend_schema(request=None, responses={202: JobStartedSerializer})
    def post(self, request, pk: int):
        """Make the missing mutants of each valid task's gold patch (known-wrong candidates, one of each
        kind the fix allows), as `manage.py make_mutants` does, as a job; grade them with the dataset's
        grade."""
        dataset, _ = _dataset(request, pk)
        return _dataset_job_accepted(request, dataset,
                                     lambda: dataset_mutants_start(dataset=dataset, user=request.user))


class SampleRequest(StrictSerializer):
    n = serializers.IntegerField(min_value=1, max_value=100, default=SAMPLES_PER_TASK,
                                 help_text="Samples per task: the missing ones below n are made.")
    steps = serializers.IntegerField(min_value=1, max_value=1000, default=AgentBudget.steps,
                                     help_text="Steps per sample at most.")
    tokens = serializers.IntegerField(min_value=1, max_value=10_000_000, default=AgentBudget.tokens,
                                      help_text="Tokens per sample at most.")
    seconds = serializers.FloatField(min_value=1, max_value=24 * 3600, default=AgentBudget.wall_seconds,
                                     help_text="Wall-clock seconds per sample at most.")
    confirm = serializers.BooleanField(default=False, help_text=f"Needed to start more than {CONFIRM_ABOVE} "
                                                                "samples: the refusal says what they may cost.")


class DatasetSample(APIView):
    permission_classes = [ReadOrMine]

    @extend_schema(request=SampleRequest, responses={202: JobStartedSerializer, **CONFLICT})
    def post(self, request, pk: int):
        """Sample candidate patches from the agent model for each valid task, as `manage.py
        sample_candidates` does: one job starts a sampling job per missing sample, each graded once made."""
        dataset, tasks = _dataset(request, pk)
        data = SampleRequest(data=request.data)
        data.is_valid(raise_exception=True)
        asked = data.validated_data
        budget = AgentBudget(steps=asked["steps"], tokens=asked["tokens"], wall_seconds=asked["seconds"])
        at_most = tasks.filter(verdict="valid", source=Task.Source.MINED).count() * asked["n"]
        try:
            if at_most > CONFIRM_ABOVE and not asked["confirm"]:
                raise ApiRefused(f"Up to {sampling_estimate_said(at_most, budget)} Send confirm: true to start it.",
                                 code="confirm_needed", field="confirm", status_code=409)
            return _dataset_job_accepted(request, dataset, lambda: dataset_sample_start(
                dataset=dataset, user=request.user, n=asked["n"], budget=budget))
        except ModelError as error:
            raise ApiRefused(f"The agent model cannot be used: {error}.", code="model_unavailable", status_code=409)


class UploadRequest(StrictSerializer):
    kind = serializers.ChoiceField(choices=Upload.Kind.choices)
    file = serializers.FileField(help_text="A SWE-bench instances (.jsonl, .json, .parquet) or predictions "
                                           "(.jsonl, .json) file.")
    report = serializers.FileField(required=False, help_text="For predictions: the evaluation report (.json).")
    dataset_name = serializers.CharField(required=False, allow_blank=True, max_length=200)
    run_name = serializers.CharField(required=False, allow_blank=True, max_length=200)


class UploadCreate(APIView):
    permission_classes = [ReadOrMine]
    parser_classes = [MultiPartParser]

    @extend_schema(request={"multipart/form-data": UploadRequest},
                   responses={202: JobStartedSerializer, 413: ErrorSerializer})
    def post(self, request):
        """Upload a file to import (multipart); its import runs as a job. Past COMMITGYM_UPLOAD_MAX_BYTES, or
        in a shape that cannot be imported, it is refused at once with nothing kept."""
        size = int(request.META.get("CONTENT_LENGTH") or 0)
        if size > settings.COMMITGYM_UPLOAD_MAX_BYTES + 64 * 1024:
            raise ApiRefused(f"The upload is {size / 1e6:,.1f} MB; at most {settings.COMMITGYM_UPLOAD_MAX_BYTES / 1e6:,.0f}"
                             " MB are imported through the API.", code="too_large", status_code=413)
        data = UploadRequest(data=request.data)
        data.is_valid(raise_exception=True)
        asked = data.validated_data
        try:
            upload = upload_start(kind=asked["kind"], file=asked["file"], report=asked.get("report"),
                                  dataset_name=asked.get("dataset_name", "").strip(),
                                  run_name=asked.get("run_name", "").strip(), user=request.user)
        except UploadRefused as refused:
            raise ApiRefused(str(refused), code="upload_refused", field="file")
        return job_accepted(request, upload.job, created=True, page_url=reverse("datasets:upload", args=[upload.pk]))


class PathImportRequest(StrictSerializer):
    kind = serializers.ChoiceField(choices=Upload.Kind.choices)
    path = serializers.CharField(max_length=4096, help_text="The file's absolute path on the server, under one of its "
                                           "COMMITGYM_IMPORT_ROOTS: a SWE-bench instances (.jsonl, .json, .parquet) "
                                           "or predictions (.jsonl, .json) file.")
    report_path = serializers.CharField(required=False, allow_blank=True, max_length=4096,
                                        help_text="For predictions: the evaluation report (.json), likewise.")
    dataset_name = serializers.CharField(required=False, allow_blank=True, max_length=200)
    run_name = serializers.CharField(required=False, allow_blank=True, max_length=200)


class PathImportCreate(APIView):
    permission_classes = [ReadOrMine]

    @extend_schema(request=PathImportRequest, responses={202: JobStartedSerializer})
    def post(self, request):
        """Import a file where it lies on the server (no size cap: what is too large to upload is put in one
        of the server's import folders and named), as a job; the file is read there and kept there."""
        data = PathImportRequest(data=request.data)
        data.is_valid(raise_exception=True)
        asked = data.validated_data
        try:
            upload = path_import_start(kind=asked["kind"], path=asked["path"],
                                       report_path=asked.get("report_path", "").strip(),
                                       dataset_name=asked.get("dataset_name", "").strip(),
                                       run_name=asked.get("run_name", "").strip(), user=request.user)
        except UploadRefused as refused:
            raise ApiRefused(str(refused), code="upload_refused", field="path")
        return job_accepted(request, upload.job, created=True, page_url=reverse("datasets:upload", args=[upload.pk]))


class ReleaseFileSerializer(serializers.Serializer):
    name = serializers.CharField()
    bytes = serializers.IntegerField()
    sha256 = serializers.CharField()
    rows = serializers.IntegerField(allow_null=True, required=False)
    url = serializers.CharField(help_text="Where to download it.")


class ReleaseSerializer(serializers.ModelSerializer):
    url = serializers.SerializerMethodField()
    page = serializers.SerializerMethodField()
    state = serializers.CharField(source="job.state", allow_null=True, default=None, read_only=True)
    files = serializers.SerializerMethodField()
    withdrawn = serializers.SerializerMethodField()

    class Meta:
        model = Release
        fields = ["id", "url", "page", "name", "version", "kind", "state", "scope", "scope_label", "states", "since",
                  "preview", "task_count", "files", "withdrawn", "created_at"]
        read_only_fields = fields

    def get_url(self, release) -> str:
        return self.context["request"].build_absolute_uri(reverse("api:release", args=[release.pk]))

    def get_page(self, release) -> str:
        return reverse("datasets:release", args=[release.pk])

    @extend_schema_field(ReleaseFileSerializer(many=True))
    def get_files(self, release):
        request = self.context["request"]
        return [{**file, "url": request.build_absolute_uri(reverse("api:release_file", args=[release.pk, file["name"]]))}
                for file in release.files]

    def get_withdrawn(self, release) -> bool:
        return bool(release.withdrawn_at)


class ReleaseDetailSerializer(ReleaseSerializer):
    class Meta(ReleaseSerializer.Meta):
        fields = ReleaseSerializer.Meta.fields + ["manifest"]
        read_only_fields = fields


class ReleaseRequest(StrictSerializer):
    dataset = serializers.IntegerField(help_text="The dataset to release.")
    name = serializers.CharField(max_length=100)
    states = serializers.ListField(child=serializers.ChoiceField(choices=Task.State.choices), required=False,
                                   help_text="The task states released (default: accepted).")
    since = serializers.DateField(required=False, allow_null=True)


class ReleaseList(APIView):
    @extend_schema(responses={200: ReleaseSerializer(many=True)})
    def get(self, request):
        """The releases you may see, by name, newest version first (a short list: not paged)."""
        releases = selectors.releases_listed(user=request.user)
        return Response(ReleaseSerializer(releases, many=True, context={"request": request}).data)

    @extend_schema(request=ReleaseRequest, responses={202: JobStartedSerializer})
    def post(self, request):
        """Write the next version of a release of a dataset, as a job (curators)."""
        if not user_can_review(request.user):
            raise ApiRefused("Only curators and admins release datasets.", code="permission_denied", status_code=403)
        data = ReleaseRequest(data=request.data)
        data.is_valid(raise_exception=True)
        asked = data.validated_data
        dataset = get_object_or_404(Dataset, pk=asked["dataset"])
        scope = release_scope_of_dataset(dataset, user=request.user)
        states = tuple(asked.get("states") or (Task.State.ACCEPTED,))
        writing = release_asked_again(name=asked["name"], dataset=dataset, states=states, since=asked.get("since"),
                                      user=request.user)
        if writing is not None:
            return job_accepted(request, writing.job, created=False,
                                page_url=reverse("datasets:release", args=[writing.pk]))
        try:
            release = release_start(name=asked["name"], scope=scope, since=asked.get("since"), user=request.user,
                                    states=states)
        except ReleaseRefused as refused:
            raise ApiRefused(f"No release made: {refused}.", code="release_refused", field="name")
        return job_accepted(request, release.job, created=True, page_url=reverse("datasets:release", args=[release.pk]))


def _release(request, pk: int) -> Release:
    release = selectors.release_seen(user=request.user, pk=pk)
    if release is None:
        raise ApiRefused("No such release.", code="not_found", status_code=404)
    return release


class ReleaseDetail(APIView):
    @extend_schema(responses={200: ReleaseDetailSerializer})
    def get(self, request, pk: int):
        """A release with its manifest and its files' checksums."""
        return Response(ReleaseDetailSerializer(_release(request, pk), context={"request": request}).data)


class WithdrawRequest(StrictSerializer):
    reason = serializers.CharField(help_text="Why, for whoever downloaded it.")


class ReleaseWithdraw(APIView):
    permission_classes = [ReadOrReview]

    @extend_schema(request=WithdrawRequest, responses={200: ReleaseDetailSerializer, **CONFLICT})
    def post(self, request, pk: int):
        """Mark a written version withdrawn: kept, marked, its number never given again."""
        release = _release(request, pk)
        data = WithdrawRequest(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            release = release_withdraw(release=release, user=request.user, reason=data.validated_data["reason"])
        except ReleaseRefused as refused:
            raise ApiRefused(f"Not withdrawn: {refused}.", code="release_refused", status_code=409)
        return Response(ReleaseDetailSerializer(release, context={"request": request}).data)


class ReleaseFile(APIView):
    @extend_schema(responses={(200, "application/octet-stream"): OpenApiTypes.BINARY})
    def get(self, request, pk: int, name: str):
        """One of the release's files, as written (its size checked against the manifest)."""
        release = _release(request, pk)
        found = release_file_found(release, name)
        if found is None:
            raise ApiRefused("No such file in this release (or it changed on disk).", code="not_found",
                             status_code=404)
        return FileResponse(open(found, "rb"), as_attachment=True, filename=f"{release}-{name}".replace("@", "-"))


urlpatterns = api_urlpatterns([
    path("datasets/", DatasetList.as_view(), name="datasets"),
    path("datasets/<int:pk>/", DatasetDetail.as_view(), name="dataset"),
    path("datasets/<int:pk>/measures/", DatasetMeasures.as_view(), name="dataset_measures"),
    path("datasets/<int:pk>/candidates/", CandidateList.as_view(), name="dataset_candidates"),
    path("datasets/<int:pk>/runs/", DatasetRuns.as_view(), name="dataset_runs"),
    path("datasets/<int:pk>/grade/", DatasetGrade.as_view(), name="dataset_grade"),
    path("datasets/<int:pk>/verify/", DatasetVerify.as_view(), name="dataset_verify"),
    path("datasets/<int:pk>/mutants/", DatasetMutants.as_view(), name="dataset_mutants"),
    path("datasets/<int:pk>/samples/", DatasetSample.as_view(), name="dataset_samples"),
    path("candidates/<int:pk>/", CandidateDetail.as_view(), name="candidate"),
    path("uploads/", UploadCreate.as_view(), name="uploads"),
    path("imports/", PathImportCreate.as_view(), name="imports"),
    path("releases/", ReleaseList.as_view(), name="releases"),
    path("releases/<int:pk>/", ReleaseDetail.as_view(), name="release"),
    path("releases/<int:pk>/withdraw/", ReleaseWithdraw.as_view(), name="release_withdraw"),
    path("releases/<int:pk>/files/<path:name>", ReleaseFile.as_view(), name="release_file"),
])
