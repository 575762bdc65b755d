"""Settings from environment variables, with embedded defaults.

No DATABASE_URL: a SQLite file under var/. No CELERY_BROKER_URL: Celery's
filesystem transport under var/, so jobs still run in a background worker
with no server to install.
"""

import os
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from worker.engine.sandbox.index_proxy import index_hosts_from

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("COMMITGYM_VAR_DIR", BASE_DIR / "var"))


def _env_bool(name, default):
    value = os.environ.get(name)
    return default if value is None else value.strip().lower() in {"1", "true", "yes", "on"}


def _env_int(name, default):
    return int(os.environ.get(name, default))


SECRET_KEY = os.environ.get("SECRET_KEY", "commitgym-embedded-default-not-for-production")
DEBUG = _env_bool("DEBUG", False)
ALLOWED_HOSTS = os.environ.get("ALLOWED_HOSTS", "127.0.0.1,localhost,testserver").split(",")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "django_htmx",
    "template_partials",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "apps.accounts",
    "apps.repositories",
    "apps.tasks",
    "apps.environments",
    "apps.llm",
    "apps.jobs",
    "apps.datasets",
    "apps.labels",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.auth.middleware.LoginRequiredMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
]

ROOT_URLCONF = "apps.urls"
WSGI_APPLICATION = "apps.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    }
]

DATABASES = {
    "default": dj_database_url.config(
        default=f"sqlite:///{VAR_DIR / 'commitgym.sqlite3'}", conn_max_age=60
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    VAR_DIR.mkdir(parents=True, exist_ok=True)
    # The worker and the web process write to one file: wait for locks. With a write-ahead log
    # readers do not wait for writers, and a commit does not wait for the disk (a crash of the
    # machine may lose the last commits, never the file).
    DATABASES["default"]["OPTIONS"] = {
        "timeout": 30, "transaction_mode": "IMMEDIATE",
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
    DATABASES["default"]["CONN_MAX_AGE"] = 0

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = VAR_DIR / "staticfiles"
STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # WhiteNoise warns on every request without it
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
WHITENOISE_USE_FINDERS = True

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"credentials_redacted": {"()": "worker.logs.CredentialsRedacted"},
                "filesystem_broker_hostname": {"()": "worker.logs.FilesystemBrokerHostname"}},
    "handlers": {"stderr": {"class": "logging.StreamHandler",
                            "filters": ["credentials_redacted", "filesystem_broker_hostname"]}},
    "root": {"handlers": ["stderr"], "level": os.environ.get("LOG_LEVEL", "INFO")},
}

# --- commitgym -------------------------------------------------------------

# Bare mirrors of registered repositories.
COMMITGYM_MIRROR_DIR = Path(os.environ.get("COMMITGYM_MIRROR_DIR", VAR_DIR / "mirrors"))
# Files uploaded on the datasets page wait here for the job that imports them: workers of the `curation`
# queue must see this folder (shared storage when they run on other machines).
COMMITGYM_UPLOAD_DIR = Path(os.environ.get("COMMITGYM_UPLOAD_DIR", VAR_DIR / "uploads"))
# The most an upload may bring (every file together); larger files are imported by the commands.
COMMITGYM_UPLOAD_MAX_BYTES = _env_int("COMMITGYM_UPLOAD_MAX_BYTES", 1 << 30)
# Folders on the server whose files the API may import in place (os.pathsep between them; none by
# default): a file past the upload cap is put there and named, not sent. Workers of the `curation`
# queue must see them at the same paths.
COMMITGYM_IMPORT_ROOTS = [Path(root) for root in os.environ.get("COMMITGYM_IMPORT_ROOTS", "").split(os.pathsep)
                          if root.strip()]
# An upload of predictions may bring a trajectory file per instance.
DATA_UPLOAD_MAX_NUMBER_FILES = 2000
# Releases' files, NAME@N/ each (and NAME@N.exports/ beside), unless a release names its own folder.
COMMITGYM_RELEASE_DIR = Path(os.environ.get("COMMITGYM_RELEASE_DIR", VAR_DIR / "releases"))
# Longest a clone or fetch may take before the job fails.
COMMITGYM_GIT_TIMEOUT = _env_int("COMMITGYM_GIT_TIMEOUT", 1800)
# Mining never reads a file larger than this whole; a commit changing one is dropped (file_too_large).
COMMITGYM_MAX_BLOB_BYTES = _env_int("COMMITGYM_MAX_BLOB_BYTES", 5 << 20)
# Environments and working copies of the sandboxes (their parents must be open to other users).
COMMITGYM_ENV_DIR = Path(os.environ.get("COMMITGYM_ENV_DIR", VAR_DIR / "envs"))
COMMITGYM_WORK_DIR = Path(os.environ.get("COMMITGYM_WORK_DIR", VAR_DIR / "work"))
COMMITGYM_CA_BUNDLE = os.environ.get("COMMITGYM_CA_BUNDLE", "")  # an extra CA for builds behind a proxy
# Runtime dependencies resolve as of a commit's date rounded up to a multiple of this many days, so that
# neighbouring commits share a lock (0: the exact date). What builds a package is resolved apart from it.
COMMITGYM_RESOLVE_ROUND_DAYS = _env_int("COMMITGYM_RESOLVE_ROUND_DAYS", 7)
# Where untrusted code runs: "local" (bubblewrap) or "docker" (a container per run).
COMMITGYM_SANDBOX = os.environ.get("COMMITGYM_SANDBOX", "local")
# Without bubblewrap the local sandbox refuses to run untrusted code, unless the operator allows it here.
COMMITGYM_ALLOW_UNSANDBOXED = _env_bool("COMMITGYM_ALLOW_UNSANDBOXED", False)
# The docker backend's Python base images, "3.11=image,3.9=image,..." (several per version: the first
# the engine has is used). Unset: python:X.Y-slim, else what `manage.py build_base_images` built.
COMMITGYM_DOCKER_IMAGES = [
    tuple(item.strip().split("=", 1)) for item in os.environ.get("COMMITGYM_DOCKER_IMAGES", "").split(",")
    if "=" in item
]
# What an install may reach (nothing else, on either backend): "host,host,...", HTTPS only, through
# the worker's proxy, which chains to the worker's own HTTPS_PROXY. Default: pypi.org, files.pythonhosted.org.
COMMITGYM_INDEX_HOSTS = index_hosts_from(os.environ.get("COMMITGYM_INDEX_HOSTS", ""))
# The network `release_images` builds on: its RUN steps run the project's install. "host" where no
# bridge may be made (these machines), reaching the host's own services too; a bridge elsewhere.
COMMITGYM_IMAGE_BUILD_NETWORK = os.environ.get("COMMITGYM_IMAGE_BUILD_NETWORK", "host")
# The package index's simple API, where a release reads the hashes of its locks' files.
COMMITGYM_INDEX_URL = os.environ.get("COMMITGYM_INDEX_URL", "https://pypi.org/simple/")
COMMITGYM_VALIDATION_RERUNS = _env_int("COMMITGYM_VALIDATION_RERUNS", 2)
COMMITGYM_TEST_TIMEOUT = _env_int("COMMITGYM_TEST_TIMEOUT", 60)
COMMITGYM_SUITE_SECONDS = _env_int("COMMITGYM_SUITE_SECONDS", 600)
# Memory a sandboxed run of tests may use (address space and, where a cgroup holds the run, resident
# memory): size it below what the machine can give every concurrent run, or the kernel, not the
# limit, ends a run that allocates without bound.
COMMITGYM_SANDBOX_MEMORY_MB = _env_int("COMMITGYM_SANDBOX_MEMORY_MB", 4096)
if COMMITGYM_SANDBOX_MEMORY_MB < 64:
    raise ImproperlyConfigured(f"COMMITGYM_SANDBOX_MEMORY_MB is {COMMITGYM_SANDBOX_MEMORY_MB}: give at least 64 (MB)")
# A running job whose worker has not reported for this long may be taken over.
COMMITGYM_JOB_STALE_SECONDS = _env_int("COMMITGYM_JOB_STALE_SECONDS", 300)
COMMITGYM_JOB_HEARTBEAT_SECONDS = _env_int("COMMITGYM_JOB_HEARTBEAT_SECONDS", 30)
# A job queued this long whose message the broker no longer holds is sent again; the sweep that
# checks runs this often (Celery beat).
COMMITGYM_JOB_REQUEUE_SECONDS = _env_int("COMMITGYM_JOB_REQUEUE_SECONDS", 120)
COMMITGYM_JOB_SWEEP_SECONDS = _env_int("COMMITGYM_JOB_SWEEP_SECONDS", 60)
# A job whose workers died this many times (out of memory, past the hard limit) is failed, not resent.
COMMITGYM_JOB_MAX_DISPATCHES = _env_int("COMMITGYM_JOB_MAX_DISPATCHES", 5)
# Local folders people other than admins may register (the command line may register any).
COMMITGYM_LOCAL_ROOTS = [p for p in os.environ.get("COMMITGYM_LOCAL_ROOTS", "").split(os.pathsep) if p]

# Language models, per role (issue_writer, test_writer, judge, agent): COMMITGYM_<ROLE>_BACKEND,
# _MODEL, _BASE_URL, _API_KEY, _TIMEOUT, _THREADS (the embedded model's), each falling back to
# COMMITGYM_LLM_<NAME>. Backends:
# "embedded" (SmolLM2-135M in the worker, the default), "openai" (any OpenAI-compatible server),
# "anthropic" (writing roles only).
def _model_settings(role: str) -> dict:
    def get(name: str, default: str = "") -> str:
        return os.environ.get(f"COMMITGYM_{role.upper()}_{name}", os.environ.get(f"COMMITGYM_LLM_{name}", default))

    return {"backend": get("BACKEND", "embedded"), "model": get("MODEL"), "base_url": get("BASE_URL"),
            "api_key": get("API_KEY"), "timeout": float(get("TIMEOUT", "120")),
            "threads": int(get("THREADS", "2"))}


COMMITGYM_MODELS = {role: _model_settings(role) for role in ("issue_writer", "test_writer", "judge", "agent")}
# An issue text whose leak score (0-1: the share of the fix it reveals) is above this is flagged.
COMMITGYM_LEAK_THRESHOLD = float(os.environ.get("COMMITGYM_LEAK_THRESHOLD", "0.3"))
# Judge calls in flight at once against a model server (the embedded model answers one at a time).
COMMITGYM_JUDGE_IN_FLIGHT = int(os.environ.get("COMMITGYM_JUDGE_IN_FLIGHT", "8"))
# Seconds of regression tests per task the execution verifier runs on the base commit (then on each candidate).
COMMITGYM_REGRESSION_SECONDS = _env_int("COMMITGYM_REGRESSION_SECONDS", 120)

# --- Celery ------------------------------------------------------------------

CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL", "filesystem://")
if CELERY_BROKER_URL.startswith("filesystem://"):
    # Kombu's filesystem transport, made safe with several processes: a message is renamed into
    # place once written whole, and a file that is not one is set aside, not the worker's end.
    CELERY_BROKER_TRANSPORT = "apps.jobs.transport:Transport"
    _queue_dir = VAR_DIR / "queue"
    for _folder in ("processed", "control", "set-aside"):
        (_queue_dir / _folder).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_queue_dir),
        "data_folder_out": str(_queue_dir),
        "processed_folder": str(_queue_dir / "processed"),
        "store_processed": False,
        "control_folder": str(_queue_dir / "control"),
        "set_aside_folder": str(_queue_dir / "set-aside"),
    }

# Queues by kind of work, each served by its own worker pool.
CELERY_TASK_DEFAULT_QUEUE = "mining"
CELERY_TASK_ROUTES = {
    # Jobs of the jobs table go to their kind's queue (apps.jobs.registry); the sweep is light.
    "worker.tasks.jobs_sweep_task": {"queue": "mining"},
}
CELERY_BEAT_SCHEDULE = {
    # A sweep that waited past the next one is dropped, not piled up behind long jobs.
    "jobs-sweep": {"task": "worker.tasks.jobs_sweep_task", "schedule": float(COMMITGYM_JOB_SWEEP_SECONDS),
                   "options": {"expires": float(COMMITGYM_JOB_SWEEP_SECONDS)}},
}
# What a worker serving every kind of work listens to (the demo's worker, the tests').
# The API (apps/api.py): tokens or the session, the same roles as the pages, one shape of errors.
COMMITGYM_API_WRITE_RATE = os.environ.get("COMMITGYM_API_WRITE_RATE", "120/min")
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["apps.api.BearerTokenAuthentication",
                                       "rest_framework.authentication.SessionAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PAGINATION_CLASS": "apps.api.NewestFirst",
    "DEFAULT_THROTTLE_CLASSES": ["apps.api.WriteThrottle"],
    "DEFAULT_THROTTLE_RATES": {"write": COMMITGYM_API_WRITE_RATE},
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "apps.api.api_exception_handler",
    "DEFAULT_PARSER_CLASSES": ["rest_framework.parsers.JSONParser", "rest_framework.parsers.FormParser",
                               "rest_framework.parsers.MultiPartParser"],
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "commitgym API",
    "DESCRIPTION": "Everything a person does on commitgym's pages, with the same roles. Send "
                   "`Authorization: Bearer TOKEN` (tokens are made on your account page).",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": ["rest_framework.permissions.IsAuthenticated"],  # as every page: signed in
    "SWAGGER_UI_DIST": "SIDECAR",  # served from here: a server without internet reaches no CDN
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    "SCHEMA_PATH_PREFIX": "/api/v1",
    "ENUM_NAME_OVERRIDES": {"TaskStateEnum": "apps.tasks.models.Task.State", "JobStateEnum": "apps.jobs.models.Job.State",
                            "TaskSourceEnum": "apps.tasks.models.Task.Source",
                            "CandidateSourceEnum": "apps.datasets.models.Candidate.Source",
                            "TaskVerdictEnum": [("valid", "valid"), ("invalid", "invalid"),
                                                ("environment_failed", "environment failed"), ("none", "not validated")],
                            "LabelVerdictEnum": "apps.labels.models.Verdict",
                            "ReleaseKindEnum": "apps.datasets.models.Release.Kind",
                            "UploadKindEnum": "apps.datasets.models.Upload.Kind",
                            "ReviewScoreEnum": "apps.tasks.models.Review.SCORES",
                            "YesNoEnum": [("yes", "Yes"), ("no", "No")]},
    "POSTPROCESSING_HOOKS": ["drf_spectacular.hooks.postprocess_schema_enums", "apps.api.errors_documented"],
}

COMMITGYM_QUEUES = ("curation", "llm", "mining", "tests")
COMMITGYM_WORKER_QUEUES = ",".join(COMMITGYM_QUEUES)
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SOFT_TIME_LIMIT = _env_int("CELERY_TASK_SOFT_TIME_LIMIT", 3 * 3600)
CELERY_TASK_TIME_LIMIT = _env_int("CELERY_TASK_TIME_LIMIT", 3 * 3600 + 300)
# Redis redelivers an unacknowledged job after this long: it must exceed the
# longest hard time limit, or a long job would run twice at once.
if CELERY_BROKER_URL.startswith(("redis://", "rediss://")):
    CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": CELERY_TASK_TIME_LIMIT + 3600}
# The API's write throttle counts in a cache every server process shares: Redis where the broker is
# Redis (or COMMITGYM_THROTTLE_CACHE_URL), else each process's own memory.
_THROTTLE_CACHE_URL = os.environ.get("COMMITGYM_THROTTLE_CACHE_URL", CELERY_BROKER_URL)
CACHES = {
    "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
    "throttle": ({"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": _THROTTLE_CACHE_URL,
                  "KEY_PREFIX": "commitgym-throttle", "OPTIONS": {"socket_connect_timeout": 1, "socket_timeout": 1}}
                 if _THROTTLE_CACHE_URL.startswith(("redis://", "rediss://"))
                 else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "throttle"}),
}
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
