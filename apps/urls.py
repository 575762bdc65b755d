from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from apps.home import home

urlpatterns = [
    path("", home, name="home"),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("repositories/", include("apps.repositories.urls")),
    path("", include("apps.tasks.urls")),
    path("", include("apps.datasets.urls")),
    path("", include("apps.labels.urls")),
    path("environments/", include("apps.environments.urls")),
    path("models/", include("apps.llm.urls")),
    path("jobs/", include("apps.jobs.urls")),
]
