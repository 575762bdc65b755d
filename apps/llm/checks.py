"""Refuse model settings that cannot work, at start-up, with a sentence saying why."""

from django.conf import settings
from django.core import checks

from worker.engine.llm.clients import ModelSettings, settings_problem


@checks.register()
def model_settings_check(app_configs=None, **kwargs):
    problems = []
    for role, values in settings.COMMITGYM_MODELS.items():
        problem = settings_problem(role, ModelSettings(**values))
        if problem:
            problems.append(checks.Error(problem, id="commitgym.E001",
                                         hint=f"Set COMMITGYM_{role.upper()}_BACKEND and its model (README)."))
    return problems
