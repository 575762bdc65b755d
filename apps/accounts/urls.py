from django.urls import path

from . import views

app_name = "accounts"

urlpatterns = [
    path("tokens/", views.account_tokens, name="tokens"),
    path("tokens/<int:pk>/revoke/", views.account_token_revoke, name="token_revoke"),
]
