from django.urls import path

from . import views

app_name = "repositories"

urlpatterns = [
    path("", views.repository_list, name="list"),
    path("<int:pk>/", views.repository_detail, name="detail"),
    path("<int:pk>/mine/", views.repository_mine, name="mine"),
    path("<int:pk>/filters/", views.repository_filters, name="filters"),
    path("<int:pk>/delete/", views.repository_delete, name="delete"),
    path("<int:pk>/jobs/<int:job_id>/", views.mining_job_state, name="job"),
    path("<int:pk>/jobs/<int:job_id>/cancel/", views.mining_job_cancel, name="job_cancel"),
    path("<int:pk>/jobs/<int:job_id>/retry/", views.mining_job_retry, name="job_retry"),
    path("<int:pk>/commits/", views.commit_list, name="commits"),
    path("<int:pk>/commits/<str:sha>/", views.commit_detail, name="commit"),
    path("<int:pk>/commits/<str:sha>/keep/", views.commit_keep_view, name="commit_keep"),
]
