from django.urls import path

from . import views

app_name = "datasets"

# Included at the site's root: a task's candidates live under the task.
urlpatterns = [
    path("datasets/", views.dataset_list, name="list"),
    path("datasets/<int:pk>/", views.dataset_detail, name="detail"),
    path("datasets/from-view/<int:pk>/", views.dataset_from_saved_view, name="from_view"),
    path("runs/<int:pk>/", views.run_detail, name="run"),
    path("imports/<int:pk>/", views.import_detail, name="import"),
    path("uploads/", views.upload_new, name="upload_new"),
    path("uploads/<int:pk>/", views.upload_detail, name="upload"),
    path("candidates/<int:pk>/", views.candidate_detail, name="candidate"),
    path("candidates/<int:pk>/equivalent/", views.mutant_equivalent, name="mutant_equivalent"),
    path("candidates/<int:pk>/hacking/", views.candidate_hacking, name="candidate_hacking"),
    path("grades/<int:pk>/runs/<int:number>/", views.grade_run, name="grade_run"),
    path("tasks/<str:instance_id>/tests-weak/", views.tests_weak, name="tests_weak"),
    path("tasks/<str:instance_id>/candidates/", views.task_candidates, name="task_candidates"),
    path("tasks/<str:instance_id>/matrix/", views.task_matrix, name="task_matrix"),
    path("executions/<int:pk>/log/", views.execution_log, name="execution_log"),
    path("verifier-tests/<int:pk>/flag/", views.verifier_test_flag, name="verifier_test_flag"),
    path("datasets/<int:pk>/toxic-tests/", views.toxic_tests, name="toxic_tests"),
    path("releases/", views.release_list, name="releases"),
    path("releases/new/", views.release_new, name="release_new"),
    path("releases/<int:pk>/", views.release_detail, name="release"),
    path("releases/<int:pk>/files/<path:name>", views.release_file, name="release_file"),
    path("releases/images/<int:pk>/", views.release_images_detail, name="release_images"),
    path("releases/<int:pk>/withdraw/", views.release_withdraw_view, name="release_withdraw"),
    path("releases/<int:pk>/export/", views.export_new, name="export_new"),
]
