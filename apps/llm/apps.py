from django.apps import AppConfig


class LlmConfig(AppConfig):
    name = "apps.llm"
    label = "llm"
    verbose_name = "Language models"

    def ready(self):
        from . import checks  # noqa: F401 - registers the settings check
