from django.urls import path

from .views import curation, tasks

app_name = "tasks"

# Included at the site's root: a repository's task list lives under its repository.
urlpatterns = [
    path("tasks/", tasks.task_list, name="all"),
    path("repositories/<int:pk>/tasks/", tasks.task_list, name="list"),
    path("repositories/<int:pk>/act/", curation.repository_act, name="repository_act"),
    path("tasks/bulk/", curation.bulk_confirm, name="bulk_confirm"),
    path("tasks/bulk/<int:pk>/", curation.bulk_detail, name="bulk"),
    path("tasks/bulk/<int:pk>/undo/", curation.bulk_undo, name="bulk_undo"),
    path("tasks/views/", curation.saved_view_create, name="view_create"),
    path("tasks/views/<int:pk>/delete/", curation.saved_view_delete, name="view_delete"),
    path("review/", curation.queue_next, name="queue"),
    path("dashboard/", curation.dashboard, name="dashboard"),
    path("tasks/<str:instance_id>/", tasks.task_detail, name="detail"),
    path("tasks/<str:instance_id>/review/", curation.review_page, name="review"),
    path("tasks/<str:instance_id>/review/submit/", curation.review_submit, name="review_submit"),
    path("tasks/<str:instance_id>/reopen/", curation.task_reopen, name="reopen"),
    path("tasks/<str:instance_id>/tests/drop/", curation.test_drop, name="test_drop"),
    path("tasks/<str:instance_id>/validation/", tasks.task_validation_state, name="validation"),
    path("tasks/<str:instance_id>/validate/", tasks.task_validate, name="validate"),
    path("tasks/<str:instance_id>/issue/", tasks.task_issue_state, name="issue"),
    path("tasks/<str:instance_id>/issue/edit/", tasks.task_issue_edit, name="issue_edit"),
    path("tasks/<str:instance_id>/issue/admit/", curation.issue_admit_view, name="issue_admit"),
    path("tasks/<str:instance_id>/backtranslate/", tasks.task_backtranslate, name="backtranslate"),
    path("tasks/<str:instance_id>/generate-tests/", tasks.task_generate_tests, name="generate_tests"),
]
