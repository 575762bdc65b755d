"""Built environments in the API, read only: those of the repositories you may see, each with its
lock (the resolved packages) and how it was built."""

from django.urls import path, reverse
from rest_framework import generics, serializers

from apps.api import api_urlpatterns
from apps.repositories.selectors import repositories_visible

from . import selectors
from .models import Environment


class EnvironmentSerializer(serializers.ModelSerializer):
    url = serializers.SerializerMethodField()
    page = serializers.SerializerMethodField()
    repository = serializers.SerializerMethodField(help_text="The repository that built it; null when you may "
                                                             "not see it (you see the environment through a "
                                                             "validation of one you may).")

    class Meta:
        model = Environment
        fields = ["id", "key", "url", "page", "backend", "python_version", "image", "sealed_image", "repository",
                  "recipe_key", "strategy", "pytest", "lifted", "as_of", "optional_added", "suite_args",
                  "created_at"]
        read_only_fields = fields

    def get_repository(self, environment) -> str | None:
        if environment.repository_id is None:
            return None
        if "repositories_seen" not in self.context:  # once per answer, not per row
            self.context["repositories_seen"] = set(repositories_visible(
                user=self.context["request"].user).values_list("pk", flat=True))
        return environment.repository.name if environment.repository_id in self.context["repositories_seen"] else None

    def get_url(self, environment) -> str:
        return self.context["request"].build_absolute_uri(reverse("api:environment", args=[environment.key]))

    def get_page(self, environment) -> str:
        return reverse("environments:detail", args=[environment.key])


class EnvironmentDetailSerializer(EnvironmentSerializer):
    class Meta(EnvironmentSerializer.Meta):
        fields = EnvironmentSerializer.Meta.fields + ["lock", "generated_files"]
        read_only_fields = fields


class EnvironmentList(generics.ListAPIView):
    """Environments built for the repositories you may see, newest first (locks on each one's own URL)."""

    serializer_class = EnvironmentSerializer

    def get_queryset(self):
        return selectors.environments_visible(user=self.request.user).select_related("repository").defer("lock")


class EnvironmentDetail(generics.RetrieveAPIView):
    serializer_class = EnvironmentDetailSerializer
    lookup_field = "key"

    def get_queryset(self):
        return selectors.environments_visible(user=self.request.user).select_related("repository")


urlpatterns = api_urlpatterns([
    path("environments/", EnvironmentList.as_view(), name="environments"),
    path("environments/<str:key>/", EnvironmentDetail.as_view(), name="environment"),
])
