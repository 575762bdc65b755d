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

from worker.engine.env.runtimes import DEBIAN_PACKAGES, DEBIAN_PYTHONS

PACKAGES = ("python3", "python3-venv", "git", "ca-certificates")
LABEL = "commitgym.pythons"  # the Pythons an image has: one built before a Python was added is rebuilt


class Command(BaseCommand):
    help = "Build commitgym-base:RELEASE with debootstrap and docker import."

    def add_arguments(self, parser):
        parser.add_argument("--release", action="append", choices=sorted(DEBIAN_PYTHONS),
                            help="Debian release (default: all of them); repeatable")
        parser.add_argument("--force", action="store_true", help="rebuild an image that is already there")

    def handle(self, *args, release=None, force=False, **options):
        if shutil.which("docker") is None:
            raise CommandError("docker is missing (deploy/dev/docker.sh installs it on Debian)")
        for each in release or list(DEBIAN_PYTHONS):
            image = f"commitgym-base:{each}"
            pythons = ",".join(DEBIAN_PYTHONS[each])
            has = subprocess.run(["docker", "image", "inspect", "-f", f'{{{{index .Config.Labels "{LABEL}"}}}}', image],
                                 capture_output=True, text=True)
            if not force and has.returncode == 0 and has.stdout.strip() == pythons:
                self.stdout.write(f"{image} is there")
                continue
            if shutil.which("debootstrap") is None:
                raise CommandError("debootstrap is missing (deploy/dev/docker.sh installs it on Debian)")
            if os.geteuid() != 0:
                raise CommandError("debootstrap needs root")
            started = time.monotonic()
            with tempfile.TemporaryDirectory(prefix="commitgym-base-") as root:
                packages = ",".join(PACKAGES + DEBIAN_PACKAGES.get(each, ()))
                built = subprocess.run(["debootstrap", "--variant=minbase", f"--include={packages}", each, root],
                                       capture_output=True, text=True)
                if built.returncode:
                    raise CommandError(f"debootstrap {each} failed:\n{built.stdout[-2000:]}{built.stderr[-2000:]}")
                tar = subprocess.Popen(["tar", "-C", root, "-c", "."], stdout=subprocess.PIPE)
                imported = subprocess.run(["docker", "import", "--change", f"LABEL {LABEL}={pythons}", "-", image],
                                          stdin=tar.stdout, capture_output=True, text=True)
                tar.stdout.close()
                if tar.wait() or imported.returncode:
                    raise CommandError(f"docker import {image} failed: {imported.stderr.strip()}")
            self.stdout.write(f"{image} (Python {' and '.join(DEBIAN_PYTHONS[each])}) built in "
                              f"{time.monotonic() - started:.1f} s")
