from django.apps import AppConfig


class RepositoriesConfig(AppConfig):
    name = "apps.repositories"
    label = "repositories"
