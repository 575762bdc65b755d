from django.urls import path

from . import curation_views, views

app_name = "tasks"

# Included at the site's root: a repository's task list lives under its repository.
urlpatterns = [
    path("tasks/", views.task_list, name="all"),
    path("repositories/<int:pk>/tasks/", views.task_list, name="list"),
    path("tasks/bulk/", curation_views.bulk_confirm, name="bulk_confirm"),
    path("tasks/bulk/<int:pk>/", curation_views.bulk_detail, name="bulk"),
    path("tasks/bulk/<int:pk>/undo/", curation_views.bulk_undo, name="bulk_undo"),
    path("tasks/views/", curation_views.saved_view_create, name="view_create"),
    path("tasks/views/<int:pk>/delete/", curation_views.saved_view_delete, name="view_delete"),
    path("review/", curation_views.queue_next, name="queue"),
    path("dashboard/", curation_views.dashboard, name="dashboard"),
    path("tasks/<str:instance_id>/", views.task_detail, name="detail"),
    path("tasks/<str:instance_id>/review/", curation_views.review_page, name="review"),
    path("tasks/<str:instance_id>/review/submit/", curation_views.review_submit, name="review_submit"),
    path("tasks/<str:instance_id>/reopen/", curation_views.task_reopen, name="reopen"),
    path("tasks/<str:instance_id>/tests/drop/", curation_views.test_drop, name="test_drop"),
    path("tasks/<str:instance_id>/validation/", views.task_validation_state, name="validation"),
    path("tasks/<str:instance_id>/validate/", views.task_validate, name="validate"),
    path("tasks/<str:instance_id>/issue/", views.task_issue_state, name="issue"),
    path("tasks/<str:instance_id>/issue/edit/", views.task_issue_edit, name="issue_edit"),
    path("tasks/<str:instance_id>/backtranslate/", views.task_backtranslate, name="backtranslate"),
    path("tasks/<str:instance_id>/generate-tests/", views.task_generate_tests, name="generate_tests"),
]
