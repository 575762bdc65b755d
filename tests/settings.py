"""The product's settings, with an app of the tests' own: a kind of background job (tests/jobkind)."""

import os

# Test processes side by side (pytest-xdist: gw0, gw1...) each have a broker of their own, a Redis database
# below the one given, so that a worker one of them starts never takes the other's jobs. Set in the
# environment, once: the commands and workers the tests start read it from there (and these settings again).
_process = os.environ.get("PYTEST_XDIST_WORKER", "")
if (_process.startswith("gw") and os.environ.get("CELERY_BROKER_URL", "").startswith("redis://")
        and "COMMITGYM_TESTS_OWN_BROKER" not in os.environ):
    _base, _, _number = os.environ["CELERY_BROKER_URL"].rpartition("/")
    os.environ["CELERY_BROKER_URL"] = os.environ["COMMITGYM_TESTS_OWN_BROKER"] = \
        f"{_base}/{int(_number or 0) - int(_process[2:])}"

from apps.settings import *  # noqa: E402,F401,F403
from apps.settings import INSTALLED_APPS  # noqa: E402

INSTALLED_APPS = [*INSTALLED_APPS, "tests.jobkind"]
