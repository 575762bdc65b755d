from django.urls import path

from . import views

app_name = "labels"

urlpatterns = [
    path("datasets/<int:pk>/label/", views.queue_next, name="next"),
    path("datasets/<int:pk>/label/<int:candidate_id>/", views.item, name="item"),
    path("datasets/<int:pk>/labels/", views.dataset_labels, name="dataset"),
    path("datasets/<int:pk>/labels/settings/", views.settings_save, name="settings"),
    path("datasets/<int:pk>/labels/candidates/<int:candidate_id>/", views.candidate_unblinded, name="candidate"),
    path("datasets/<int:pk>/labels/candidates/<int:candidate_id>/settle/", views.settle, name="settle"),
]
