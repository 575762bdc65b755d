from django.urls import path

from . import views

app_name = "llm"

urlpatterns = [
    path("", views.model_list, name="list"),
    path("<str:role>/check/", views.model_check, name="check"),
]
