"""The account page: a person's API tokens, made (the secret shown once, on the answer to the form
that made it) and revoked."""

from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from .models import ApiToken
from .tokens import TokenRefused, api_token_create, api_token_revoke


@require_http_methods(["GET", "POST"])
def account_tokens(request):
    made, refusal, name = "", "", ""
    if request.method == "POST":
        name = request.POST.get("name", "")
        try:
            _, made = api_token_create(user=request.user, name=name)
            name = ""
        except TokenRefused as refused:
            refusal = str(refused)
    context = {"tokens": ApiToken.objects.filter(user=request.user), "made": made, "refusal": refusal,
               "name": name}
    response = render(request, "accounts/tokens.html", context, status=400 if refusal else 200)
    response["Cache-Control"] = "no-store"  # the one answer that holds a secret
    return response


@require_POST
def account_token_revoke(request, pk: int):
    token = get_object_or_404(ApiToken, user=request.user, pk=pk)
    api_token_revoke(token=token)
    messages.success(request, f"Token {token.name} ({token.prefix}…) is revoked: the API refuses it from now on.")
    return redirect("accounts:tokens")
