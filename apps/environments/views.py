"""Pages of built environments. An environment is seen by those who see a repository it was built
for or used by (admins see them all); otherwise it is a 404."""

from django.core.paginator import Paginator
from django.shortcuts import get_object_or_404, render

from apps.repositories.selectors import repositories_visible

from . import selectors
from .registry import ENVIRONMENT_PAGE

ENVIRONMENTS_PER_PAGE = 50

BUILD_NETWORKS = {
    "index_proxy": "the package index only, through commitgym's proxy: install scripts could reach nothing "
                   "else, neither this machine's services nor the internet",
    "host": "host network: install scripts could reach this machine's services (set a bridge network in production)",
    "bridge": "bridge network: install scripts reached the internet but not this machine's services",
    "none": "no network: installs could not download anything",
}


def build_network_sentence(network: str) -> str:
    return BUILD_NETWORKS.get(network, f"{network} network" if network else "not recorded")


def environment_list(request):
    environments = selectors.environments_listed(user=request.user)
    page = Paginator(environments, ENVIRONMENTS_PER_PAGE).get_page(request.GET.get("page"))
    repository_ids = {env.repository_id for env in page.object_list if env.repository_id}
    visible = set(repositories_visible(user=request.user).filter(pk__in=repository_ids).values_list("pk", flat=True))
    rows = [(env, env.repository if env.repository_id in visible else None) for env in page.object_list]
    return render(request, "environments/environment_list.html", {"page": page, "rows": rows})


def environment_detail(request, key: str):
    environment = get_object_or_404(selectors.environments_visible(user=request.user).select_related("repository"),
                                    key=key)
    repository = environment.repository
    if repository and not repositories_visible(user=request.user).filter(pk=repository.pk).exists():
        repository = None  # seen through a validation of another repository: the builder's name stays hidden
    context = {
        "environment": environment,
        "repository": repository,
        "build_network": build_network_sentence(environment.build_network),
        **ENVIRONMENT_PAGE.context(request, environment),
    }
    return render(request, "environments/environment_detail.html", context)
