"""The product's settings, with an app of the tests' own: a kind of background job (tests/jobkind)."""

from apps.settings import *  # noqa: F401,F403
from apps.settings import INSTALLED_APPS

INSTALLED_APPS = [*INSTALLED_APPS, "tests.jobkind"]
