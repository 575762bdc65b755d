from django.db import models

from worker.engine.sandbox.index_proxy import INDEX_PROXY


class Environment(models.Model):
    """A built virtualenv, identified by its Python version and resolved lock; shared by
    every commit whose tests it collects."""

    key = models.CharField(max_length=64, unique=True)
    backend = models.CharField(max_length=16, default="local")
    python_version = models.CharField(max_length=32)
    image = models.CharField(max_length=255, blank=True, help_text="The docker image its Python lives in.")
    sealed_image = models.CharField(max_length=255, blank=True, help_text=(
        "An image of its own that holds the environment (a release's, on the docker backend): runs use it as it "
        "is, mounting nothing."))
    lock = models.TextField(help_text="The resolved packages (uv pip freeze).")
    recipe_key = models.CharField(max_length=64, blank=True, help_text="The install files it was built from.")
    path = models.CharField(max_length=1000, help_text="Where the environment lives on the worker.")
    build_network = models.CharField(max_length=32, default=INDEX_PROXY, help_text="The network installs used.")
    repository = models.ForeignKey("repositories.Repository", null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="environments", help_text="The repository it was built for.")
    strategy = models.CharField(max_length=255, blank=True, help_text="The attempt that built it.")
    pytest = models.CharField(max_length=128, blank=True, help_text="The pytest it has, and why that one.")
    lifted = models.JSONField(default=dict, blank=True,
                              help_text="{package: cutoff}: packages resolved later than the commit's date.")
    as_of = models.CharField(max_length=40, blank=True,
                             help_text="The date the rest resolved as of (ISO); blank on Python 2, or not recorded.")
    optional_added = models.JSONField(default=list, blank=True,
                                      help_text="[{requirement, why}]: optional dependencies added for skipped tests.")
    generated_files = models.JSONField(default=list, blank=True,
                                       help_text="Files the install wrote into the working copy, laid into every run.")
    suite_args = models.JSONField(default=list, blank=True,
                                  help_text="What a run of the whole suite gives pytest (nose-era test folders).")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self):
        return f"{self.key} (Python {self.python_version})"

    @property
    def package_count(self) -> int:
        return len([line for line in self.lock.splitlines() if line.strip()])
