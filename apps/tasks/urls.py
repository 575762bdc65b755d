from django.urls import path

from . import views

app_name = "tasks"

# Included at the site's root: the task list lives under its repository.
urlpatterns = [
    path("repositories/<int:pk>/tasks/", views.task_list, name="list"),
    path("tasks/<str:instance_id>/", views.task_detail, name="detail"),
    path("tasks/<str:instance_id>/validation/", views.task_validation_state, name="validation"),
    path("tasks/<str:instance_id>/validate/", views.task_validate, name="validate"),
    path("tasks/<str:instance_id>/issue/", views.task_issue_state, name="issue"),
    path("tasks/<str:instance_id>/issue/edit/", views.task_issue_edit, name="issue_edit"),
    path("tasks/<str:instance_id>/backtranslate/", views.task_backtranslate, name="backtranslate"),
    path("tasks/<str:instance_id>/generate-tests/", views.task_generate_tests, name="generate_tests"),
]
