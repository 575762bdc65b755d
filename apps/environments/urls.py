from django.urls import path

from . import views

app_name = "environments"

urlpatterns = [
    path("", views.environment_list, name="list"),
    path("<str:key>/", views.environment_detail, name="detail"),
]
