from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_not_required
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from apps.datasets import api as datasets_api
from apps.api import api_not_found
from apps.home import home
from apps.environments import api as environments_api
from apps.jobs import api as jobs_api
from apps.labels import api as labels_api
from apps.repositories import api as repositories_api
from apps.tasks import api as tasks_api

# Each app's resources, from its own api.py.
API_V1 = [*repositories_api.urlpatterns, *tasks_api.urlpatterns, *environments_api.urlpatterns,
          *datasets_api.urlpatterns, *labels_api.urlpatterns, *jobs_api.urlpatterns]

urlpatterns = [
    path("", home, name="home"),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("accounts/", include("apps.accounts.urls")),
    path("api/v1/", include((API_V1, "api"))),
    path("api/schema/", login_not_required(SpectacularAPIView.as_view()), name="api-schema"),
    path("api/docs/", login_not_required(SpectacularSwaggerView.as_view(url_name="api-schema")), name="api-docs"),
    path("api/<path:rest>", login_not_required(api_not_found)),
    path("admin/", admin.site.urls),
    path("repositories/", include("apps.repositories.urls")),
    path("", include("apps.tasks.urls")),
    path("", include("apps.datasets.urls")),
    path("", include("apps.labels.urls")),
    path("environments/", include("apps.environments.urls")),
    path("models/", include("apps.llm.urls")),
    path("jobs/", include("apps.jobs.urls")),
]

handler500 = "apps.api.server_error"
