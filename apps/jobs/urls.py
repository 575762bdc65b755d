from django.urls import path

from . import views

app_name = "jobs"

urlpatterns = [
    path("", views.job_list, name="list"),
    path("workers/", views.job_workers, name="workers"),
    path("ended/", views.job_toasts, name="toasts"),
    path("<int:pk>/cancel/", views.job_cancel_view, name="cancel"),
    path("<int:pk>/retry/", views.job_retry_view, name="retry"),
]
