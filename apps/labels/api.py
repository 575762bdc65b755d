"""Labels in the API: an annotator's next item (blind, as on the page: the issue and the patch,
never who made it, its grade, the verifiers' scores or anyone else's label) and their label; a
curator's settlement, the dataset's agreement figures and the labels' export as a job."""

from django.shortcuts import get_object_or_404
from django.urls import path, reverse
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.api import CONFLICT, ApiRefused, JobStartedSerializer, StrictSerializer, Unblinded, api_urlpatterns, job_accepted
from apps.accounts.roles import user_roles
from apps.datasets.models import Candidate, Dataset
from apps.datasets.selectors import dataset_seen, dataset_tasks, dataset_tasks_visible
from apps.tasks.models import current_issue
from apps.tasks.selectors import tasks_visible

from . import selectors, services
from .exports import label_export_start
from .models import Label, LabelExport, Settlement, Verdict


def _dataset_seen(request, pk: int) -> Dataset:
    dataset = dataset_seen(user=request.user, pk=pk)
    if dataset is None:
        raise ApiRefused("No such dataset.", code="not_found", status_code=404)
    return dataset


def _labeller_required(request) -> None:
    if not user_roles(request.user):
        raise ApiRefused("Only annotators, curators and admins label candidates.", code="permission_denied",
                         status_code=403)


class ItemSerializer(serializers.Serializer):
    candidate = serializers.IntegerField()
    issue = serializers.CharField(allow_blank=True, help_text="The task's current issue.")
    patch = serializers.CharField(allow_blank=True)
    trajectory = serializers.ListField(child=serializers.DictField(), help_text="Empty where the dataset hides it.")
    hold_expires_at = serializers.DateTimeField()


class NextItemSerializer(serializers.Serializer):
    item = ItemSerializer(allow_null=True, help_text="null: nothing is left for you to label.")
    labelled = serializers.IntegerField(help_text="How many you have labelled in this dataset.")


class LabelRequest(StrictSerializer):
    candidate = serializers.IntegerField()
    verdict = serializers.ChoiceField(choices=Verdict.choices)
    confidence = serializers.IntegerField(help_text="1 (a guess) to 3 (sure).")
    rationale = serializers.CharField(required=False, allow_blank=True, max_length=services.RATIONALE_CHARS,
                                      help_text="Required for incorrect.")


class LabelSerializer(serializers.ModelSerializer):
    class Meta:
        model = Label
        fields = ["id", "candidate_id", "verdict", "confidence", "rationale", "lines", "seconds", "created_at"]
        read_only_fields = fields


class LabelQueue(APIView):
    @extend_schema(responses={200: NextItemSerializer})
    def get(self, request, pk: int):
        """Your next item, held for you (the same one until you label it or the hold expires)."""
        _labeller_required(request)
        dataset = _dataset_seen(request, pk)
        candidate = services.label_queue_next(dataset=dataset, user=request.user)
        labelled = Label.objects.filter(dataset=dataset, annotator=request.user).count()
        if candidate is None:
            return Response({"item": None, "labelled": labelled})
        label_settings = selectors.dataset_label_settings(dataset)
        hold = services.label_hold_of(dataset=dataset, candidate=candidate, user=request.user)
        issue = current_issue(list(candidate.task.issue_versions.all()))
        hidden = label_settings.hide_trajectory or label_settings.control_share
        return Response({"item": {"candidate": candidate.pk, "issue": issue.text if issue else "",
                                  "patch": candidate.patch, "trajectory": [] if hidden else candidate.trajectory,
                                  "hold_expires_at": hold.expires_at}, "labelled": labelled})

    @extend_schema(request=LabelRequest, responses={201: LabelSerializer, **CONFLICT})
    def post(self, request, pk: int):
        """Label the item you hold: correct, incorrect (with what is wrong) or can't tell, and how sure."""
        _labeller_required(request)
        dataset = _dataset_seen(request, pk)
        data = LabelRequest(data=request.data)
        data.is_valid(raise_exception=True)
        asked = data.validated_data
        candidate = Candidate.objects.filter(pk=asked["candidate"], task__in=dataset_tasks_visible(
            dataset, user=request.user)).first()
        if candidate is None:
            raise ApiRefused("This candidate is not assigned to you: take your next item from the queue.",
                             code="not_assigned", field="candidate", status_code=409)
        try:
            label = services.label_submit(dataset=dataset, candidate=candidate, user=request.user,
                                          form=services.LabelForm(asked["verdict"], asked["confidence"],
                                                                  asked.get("rationale", "")))
        except services.LabelRefused as refused:
            raise ApiRefused(str(refused), code="label_refused", status_code=409)
        return Response(LabelSerializer(label).data, status=status.HTTP_201_CREATED)


class SettleRequest(StrictSerializer):
    verdict = serializers.ChoiceField(choices=Verdict.choices)
    note = serializers.CharField(max_length=services.RATIONALE_CHARS, help_text="Why this is the final label.")


class SettlementSerializer(serializers.ModelSerializer):
    settled_by = serializers.SlugRelatedField(slug_field="username", read_only=True)

    class Meta:
        model = Settlement
        fields = ["id", "candidate_id", "verdict", "note", "settled_by", "labels_seen", "created_at"]
        read_only_fields = fields


class LabelSettle(APIView):
    permission_classes = [Unblinded]

    @extend_schema(request=SettleRequest, responses={201: SettlementSerializer, **CONFLICT})
    def post(self, request, pk: int, candidate_id: int):
        """A curator's final label of a candidate whose annotators disagree, with a note."""
        dataset = _dataset_seen(request, pk)
        candidate = get_object_or_404(Candidate, pk=candidate_id,
                                      task__in=dataset_tasks_visible(dataset, user=request.user))
        data = SettleRequest(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            settlement = services.label_settle(candidate=candidate, user=request.user, **data.validated_data)
        except services.LabelRefused as refused:
            raise ApiRefused(str(refused), code="settle_refused", status_code=409)
        return Response(SettlementSerializer(settlement).data, status=status.HTTP_201_CREATED)


class ChanceCorrectedSerializer(serializers.Serializer):
    value = serializers.FloatField(allow_null=True, help_text="null where chance alone agrees totally.")
    items = serializers.IntegerField()
    observed = serializers.FloatField(allow_null=True, help_text="The raw agreement over the same items.")


class PairSerializer(serializers.Serializer):
    first = serializers.CharField()
    second = serializers.CharField()
    kappa = ChanceCorrectedSerializer(help_text="Cohen's kappa over the items both labelled.")


class AgreementSerializer(serializers.Serializer):
    raw = serializers.FloatField(allow_null=True, help_text="Over every pair of labels of an item; can't tell is "
                                                            "an answer of its own.")
    pairs = serializers.IntegerField()
    fleiss = ChanceCorrectedSerializer(help_text="Fleiss' kappa over the items with the full number of labels.")
    alpha = ChanceCorrectedSerializer(help_text="Krippendorff's nominal alpha; can't tell counts as missing.")
    raters = serializers.IntegerField()
    cohens = PairSerializer(many=True)
    labels = serializers.IntegerField()
    as_of = serializers.FloatField(help_text="When the figures were computed (Unix time).")


class LabelAgreement(APIView):
    permission_classes = [Unblinded]

    @extend_schema(responses={200: AgreementSerializer})
    def get(self, request, pk: int):
        """The dataset's agreement figures, as its labels page shows them (every pair of annotators)."""
        dataset = _dataset_seen(request, pk)
        figures = selectors.dataset_label_figures(dataset, user=request.user)
        agreement = figures["agreement"]

        def chance(value):
            return {"value": value.value, "items": value.items, "observed": value.observed}

        return Response({"raw": agreement.raw, "pairs": agreement.pairs, "fleiss": chance(agreement.fleiss),
                         "alpha": chance(agreement.alpha), "raters": agreement.raters,
                         "cohens": [{"first": str(first), "second": str(second), "kappa": chance(kappa)}
                                    for first, second, kappa in agreement.cohens],
                         "labels": figures["label_count"], "as_of": figures["as_of"]})


class GivenLabelSerializer(LabelSerializer):
    task = serializers.CharField(source="candidate.task.instance_id", read_only=True)
    annotator = serializers.SlugRelatedField(slug_field="username", read_only=True)
    answer = serializers.CharField(read_only=True, help_text="A hidden control's known answer; empty otherwise.")

    class Meta(LabelSerializer.Meta):
        fields = LabelSerializer.Meta.fields + ["task", "annotator", "control", "answer"]
        read_only_fields = fields


@extend_schema(parameters=[
    OpenApiParameter("annotator", str, description="An annotator's user name."),
    OpenApiParameter("verdict", str, enum=Verdict.values),
    OpenApiParameter("task", str, description="A task's instance id."),
])
class LabelList(generics.ListAPIView):
    """The labels given through the dataset's queue on tasks you see, newest first, as given (curators and
    admins; the export writes them all at once, as a file)."""

    serializer_class = GivenLabelSerializer
    permission_classes = [Unblinded]

    def get_queryset(self):
        dataset = _dataset_seen(self.request, self.kwargs["pk"])
        labels = selectors.dataset_labels(dataset, user=self.request.user).select_related(
            "annotator", "candidate__task").defer("candidate__patch", "candidate__trajectory", "candidate__made")
        query = self.request.query_params
        if query.get("annotator"):
            labels = labels.filter(annotator__username=query["annotator"])
        if query.get("verdict"):
            labels = labels.filter(verdict=query["verdict"])
        if query.get("task"):
            labels = labels.filter(candidate__task__instance_id=query["task"])
        return labels


class ExportRequest(StrictSerializer):
    format = serializers.ChoiceField(choices=LabelExport.Format.values, default=LabelExport.Format.JSONL)
    pseudonymize = serializers.BooleanField(default=False)


class LabelExportCreate(APIView):
    permission_classes = [Unblinded]

    @extend_schema(request=ExportRequest, responses={202: JobStartedSerializer})
    def post(self, request, pk: int):
        """Every label with its rationale, confidence, seconds, annotator, final label and who settled it,
        written by a job."""
        dataset = _dataset_seen(request, pk)
        if dataset_tasks(dataset).exclude(id__in=tasks_visible(user=request.user)).exists():
            raise ApiRefused("This dataset holds tasks of repositories you may not see: an admin can export its "
                             "labels.", code="permission_denied", status_code=403)
        data = ExportRequest(data=request.data)
        data.is_valid(raise_exception=True)
        export = label_export_start(dataset=dataset, user=request.user, **data.validated_data)
        return job_accepted(request, export.job, created=True, page_url=reverse("labels:dataset", args=[dataset.pk]))


urlpatterns = api_urlpatterns([
    path("datasets/<int:pk>/labels/", LabelQueue.as_view(), name="labels"),
    path("datasets/<int:pk>/labels/agreement/", LabelAgreement.as_view(), name="labels_agreement"),
    path("datasets/<int:pk>/labels/given/", LabelList.as_view(), name="labels_given"),
    path("datasets/<int:pk>/labels/export/", LabelExportCreate.as_view(), name="labels_export"),
    path("datasets/<int:pk>/labels/candidates/<int:candidate_id>/settle/", LabelSettle.as_view(),
         name="labels_settle"),
])
