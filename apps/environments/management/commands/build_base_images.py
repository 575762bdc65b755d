"""Build the Docker sandbox's base images from Debian releases, for machines that reach no image
registry: debootstrap a minimal system with Python and git, then `docker import` it. Each release
brings its own Python (DEBIAN_PYTHONS), which the environment builder then searches. Needs root,
debootstrap and a Docker engine (deploy/dev/docker.sh installs them on Debian and calls this)."""

import os
import shutil
import subprocess
import tempfile
import time

from django.core.management.base import BaseCommand, CommandError

from worker.engine.env.runtimes import DEBIAN_PYTHONS

PACKAGES = "python3,python3-venv,git,ca-certificates"


class Command(BaseCommand):
    help = "Build commitgym-base:RELEASE with debootstrap and docker import."

    def add_arguments(self, parser):
        parser.add_argument("--release", action="append", choices=sorted(DEBIAN_PYTHONS),
                            help="Debian release (default: all of them); repeatable")
        parser.add_argument("--force", action="store_true", help="rebuild an image that is already there")

    def handle(self, *args, release=None, force=False, **options):
        for name in ("debootstrap", "docker"):
            if shutil.which(name) is None:
                raise CommandError(f"{name} is missing (deploy/dev/docker.sh installs it on Debian)")
        if os.geteuid() != 0:
            raise CommandError("debootstrap needs root")
        for each in release or list(DEBIAN_PYTHONS):
            image = f"commitgym-base:{each}"
            if not force and subprocess.run(["docker", "image", "inspect", image], capture_output=True).returncode == 0:
                self.stdout.write(f"{image} is there")
                continue
            started = time.monotonic()
            with tempfile.TemporaryDirectory(prefix="commitgym-base-") as root:
                built = subprocess.run(["debootstrap", "--variant=minbase", f"--include={PACKAGES}", each, root],
                                       capture_output=True, text=True)
                if built.returncode:
                    raise CommandError(f"debootstrap {each} failed:\n{built.stdout[-2000:]}{built.stderr[-2000:]}")
                tar = subprocess.Popen(["tar", "-C", root, "-c", "."], stdout=subprocess.PIPE)
                imported = subprocess.run(["docker", "import", "-", image], stdin=tar.stdout, capture_output=True,
                                          text=True)
                tar.stdout.close()
                if tar.wait() or imported.returncode:
                    raise CommandError(f"docker import {image} failed: {imported.stderr.strip()}")
            self.stdout.write(f"{image} (Python {DEBIAN_PYTHONS[each]}) built in {time.monotonic() - started:.1f} s")
