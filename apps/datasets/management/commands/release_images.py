import json

from django.core.management.base import BaseCommand, CommandError

from apps.datasets.models import ReleaseImages
from apps.datasets.release_images import ImagesRefused, release_images_start
from apps.datasets.releases import ReleaseRefused, release_named
from apps.jobs.on_demand import job_waited


class Command(BaseCommand):
    help = ("Build a release's environment images on the local Docker engine from the release's own Dockerfiles, "
            "then the task images asked for, as a job; print one line per image with its id, seconds and size.")

    def add_arguments(self, parser):
        parser.add_argument("release", help="NAME@VERSION, or NAME for its latest version")
        parser.add_argument("--tasks", nargs="+", default=[], metavar="ID", help="instance ids: their task images too")
        parser.add_argument("--json", action="store_true", dest="as_json", help="one JSON line per image")
        parser.add_argument("--timeout", type=float, default=6 * 3600, help="seconds to wait for the build")

    def handle(self, *args, release, tasks, as_json, timeout, **options):
        try:
            build = release_images_start(release=release_named(release), tasks=tasks)
        except (ReleaseRefused, ImagesRefused) as refused:
            raise CommandError(str(refused)) from None
        try:
            job_waited(build.job_id, queues="tests", what=f"the images of {build.release}", stderr=self.stderr,
                       timeout=timeout)
        finally:
            for image in ReleaseImages.objects.get(id=build.id).images:
                self._report(image, as_json)

    def _report(self, image: dict, as_json: bool) -> None:
        if as_json:
            self.stdout.write(json.dumps(image))
            return
        what = f"task {image['task']}" if image["task"] else f"environment {image['key']}"
        self.stdout.write(f"{what}: {image['tag']} {image['image_id']} ({image['seconds']:.1f} s, "
                          f"{image['size'] / 1e6:.0f} MB)")
