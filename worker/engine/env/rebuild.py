"""Each environment of a release as files anyone rebuilds it from, with `docker build` alone.

Per environment key, a folder `environments/<key>/` holds:
- `requirements.lock`: every distribution by name and version, the project itself left out (it is
  installed from a tree, never from the index);
- `tasks`: one line per task, its instance id and the source archive of its base commit;
- `generated`: the files the project's install wrote into its tree, which every run lays in;
- `Dockerfile`, built with the release folder as context, in stages:
  `base` (what the public Debian image lacks: the Python, git, CA certificates, via apt-get),
  `environment` (the environment at /workspace/env, built by the same tool, with the same Python,
  from the lock as of the same dates, and the project installed from its setup commit's tree, which
  is then removed: editable installs point at /workspace/repo, which each task fills),
  `source` (one task's archive unpacked) and `task` (the environment plus that tree).
"""

import re
import shlex
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Optional

from worker.engine.env.recipes import ENV, REPO, WORKING_COPY_PTH, WORKSPACE, working_copy_pth_line
from worker.engine.env.runtimes import DEBIAN_PYTHONS, PYTHON_VERSION, is_python2

ENVIRONMENTS = "environments"
SEED = "build-seed.lock"  # Python 2: the lock's setuptools and wheel, installed before the rest
_SEEDS = re.compile(r"^(setuptools|wheel)==", re.IGNORECASE)
EXTRA_CA = "extra-ca.crt"  # in the release folder: empty, or the CA bundle of a TLS-inspecting proxy
TOOLS = "/opt/commitgym/tools"
GENERATED = f"{WORKSPACE}/generated"  # in an environment image: the files its install wrote into the tree
# The project's own line in a freeze: an install from the working copy, which no one else has.
_FROM_THE_TREE = re.compile(r"^\S+ @ file:", re.IGNORECASE)
_PINNED = re.compile(r"^[A-Za-z0-9._-]+(\[[^\]]*\])?(==| @ )")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


@dataclass(frozen=True)
class EnvironmentToRelease:
    key: str
    python_version: str  # as the environment's interpreter says it: "3.11.2"
    lock: str  # as the builder froze it
    strategy: str  # the install strategy that built it: how the project itself is installed
    setup_archive: str  # the source archive of the tree it was built on ("" when none could be made)
    tasks: tuple[tuple[str, str], ...]  # (instance id, its base commit's source archive)
    tool_version: str  # uv's version on the machine that built it (Python 3)
    as_of: str = ""  # the date the resolution used for what the code runs with (ISO; "" when not recorded)
    lifted: dict[str, str] = field(default_factory=dict)  # package -> its own later cutoff ("none": none)
    generated: tuple[str, ...] = ()  # files the install wrote into the tree
    image: str = ""  # the image it was built in ("" for the local backend)
    hashes: dict = field(default_factory=dict)  # pinned line -> the index's SHA-256 of each of its files

    @property
    def python(self) -> str:
        return ".".join(self.python_version.split(".")[:2])

    @property
    def python2(self) -> bool:
        return is_python2(self.python)

    @property
    def tool(self) -> str:
        return "virtualenv and pip" if self.python2 else f"uv {self.tool_version}"


_KEY = re.compile(r"[0-9a-f]{8,64}")
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,254}")
_ARCHIVE = re.compile(r"sources/[A-Za-z0-9][A-Za-z0-9._-]{0,300}\.tar\.gz")
_TOOL_VERSION = re.compile(r"[0-9]{1,4}(\.[0-9]{1,4}){1,3}")
_CUTOFF = re.compile(r"none|[0-9]{4}-[0-9]{2}-[0-9]{2}")


def unreleasable(environment: EnvironmentToRelease) -> str:
    """Why the environment's files cannot be written as they are ("" when they can): everything that
    reaches a Dockerfile's lines, a shell's words or a path is checked to be what it says it is (the
    build ran the repository's code, which could have written any of it)."""
    problems = [
        (not key_plain(environment.key), "its key is not hexadecimal"),
        (not PYTHON_VERSION.fullmatch(environment.python_version), "its Python's version is not a version"),
        (not environment.python2 and not _TOOL_VERSION.fullmatch(environment.tool_version),
         "the version of uv that builds it is not known here"),
        (bool(environment.as_of) and not _iso_datetime(environment.as_of), "its as-of date is not a date"),
        (not all(_NAME.match(package) and _CUTOFF.fullmatch(str(cutoff))
                 for package, cutoff in environment.lifted.items()), "a lifted cutoff is not a package and a date"),
        (not all(_ID.fullmatch(instance) and (not archive or archive_name_plain(archive))
                 for instance, archive in environment.tasks), "a task's id or archive name is not plain"),
        (bool(environment.setup_archive) and not archive_name_plain(environment.setup_archive),
         "its setup archive's name is not plain"),
        (not all(_plain_path(path) for path in environment.generated),
         "a file its install generated has a name no shell line may carry"),
    ]
    return "; ".join(why for wrong, why in problems if wrong)


def archive_name_plain(name: str) -> bool:
    """A source archive's name as a release writes it: a file of sources/, nothing that leaves the folder."""
    return _ARCHIVE.fullmatch(name) is not None


def key_plain(key: str) -> bool:
    return _KEY.fullmatch(key) is not None


def _iso_datetime(text: str) -> bool:
    try:
        datetime.fromisoformat(text)
    except ValueError:
        return False
    return re.fullmatch(r"[0-9T:+.Z-]+", text) is not None


def _plain_path(path: str) -> bool:
    return bool(path) and "\n" not in path and not path.startswith(("-", "/")) and ".." not in path.split("/")


def debian_release(environment: EnvironmentToRelease) -> Optional[str]:
    """The Debian release whose Python the environment's is: the base image's own, or the release
    that ships that Python; None where none does (the official python image serves those)."""
    tagged = re.fullmatch(r"commitgym-base:(\w+)", environment.image or "")
    if tagged and tagged.group(1) in DEBIAN_PYTHONS:
        return tagged.group(1)
    return next((release for release, pythons in DEBIAN_PYTHONS.items() if environment.python in pythons), None)


def default_base(environment: EnvironmentToRelease) -> str:
    release = debian_release(environment)
    return f"debian:{release}-slim" if release else f"python:{environment.python}-slim"


def release_lock(lock: str, hashes: Optional[dict] = None) -> str:
    """The lock as released: the pinned lines, without the project's own (installed from its tree),
    each with the index's hashes of its files where `hashes` has them (uv then installs no other file)."""
    lines = [line.strip() for line in lock.splitlines()]
    kept = [line for line in lines if _PINNED.match(line) and not _FROM_THE_TREE.match(line)]
    return "".join(line + "".join(f" \\\n    --hash=sha256:{digest}" for digest in (hashes or {}).get(line, ()))
                   + "\n" for line in kept)


def cutoff_args(environment: EnvironmentToRelease) -> list[str]:
    """uv's date cutoffs, as the build used them: what an sdist's build resolves obeys them too."""
    if environment.python2 or not environment.as_of:
        return []
    args = ["--exclude-newer", environment.as_of]
    for package, cutoff in sorted(environment.lifted.items()):
        if _NAME.match(package):
            args += ["--exclude-newer-package", f"{package}={'false' if cutoff == 'none' else cutoff}"]
    return args


# Python 2's installs: the environment's pip, nothing resolved beyond what it is given.
_PIP2 = (f"{ENV}/bin/python", "-m", "pip", "install", "--disable-pip-version-check", "--no-input", "--no-deps")


def project_install_argv(environment: EnvironmentToRelease, *, uv: str = "uv", files: str = "/release/env"
                         ) -> list[list[str]]:
    """The commands that install the project itself from the tree at /workspace/repo, as its strategy
    did (the dependencies are the lock's: nothing more is resolved). `uv` runs uv; `files` is where
    the environment's folder of the release is."""
    words = environment.strategy.split()  # "python3.11 editable[test] pytest~=8.0.0": the Python, the strategy, ...
    strategy = words[1] if len(words) > 1 and words[0].startswith("python") else (words or [""])[0]
    on_path = [[f"{ENV}/bin/python", "-c", "import shutil, sysconfig; "
                f"shutil.copy('{files}/{WORKING_COPY_PTH}', sysconfig.get_paths()['purelib'])"]]
    if environment.python2:
        if strategy.startswith("editable"):
            return [[*_PIP2, "-e", REPO]]
        return [[*_PIP2, REPO], *on_path] if strategy == "install" else on_path
    install = [uv, "pip", "install", "--python", f"{ENV}/bin/python", "--no-deps", *cutoff_args(environment)]
    if strategy == "editable-compat":
        return [[*install, "--config-settings", "editable_mode=compat", "-e", REPO]]
    if strategy.startswith("editable"):
        return [[*install, "-e", REPO]]
    return [[*install, REPO], *on_path] if strategy == "install" else on_path


def _project_install(environment: EnvironmentToRelease) -> list[str]:
    return [shlex.join(argv) for argv in project_install_argv(environment)]


def lock_install_argv(environment: EnvironmentToRelease, *, uv: str = "uv", files: str = "/release/env"
                      ) -> list[list[str]]:
    """The commands that install the lock into the environment (Python 2: its setuptools and wheel first)."""
    if environment.python2:
        return [[*_PIP2, "-r", f"{files}/{SEED}"], [*_PIP2, "-r", f"{files}/requirements.lock"]]
    return [[uv, "pip", "install", "--compile-bytecode", "--python", f"{ENV}/bin/python", "--no-deps",
             *cutoff_args(environment), "-r", f"{files}/requirements.lock"]]


def _base_stage(environment: EnvironmentToRelease) -> list[str]:
    """Whatever of the Python (with venv, or Python 2 with Debian's virtualenv), git and the CA
    certificates the base lacks, from apt-get: all of it on the public Debian image, nothing on a base
    that has them (the official python image has its Python in /usr/local)."""
    python = f"python{environment.python}"
    if environment.python2:
        checks = [(f"command -v {python}", python), ("python3 -c 'import virtualenv'", "python3-virtualenv")]
    else:
        checks = [(f"test -x /usr/local/bin/{python} || dpkg -s {python} {python}-venv", f"{python} {python}-venv")]
    checks += [("command -v git", "git"), ("dpkg -s ca-certificates", "ca-certificates")]
    return [
        f"ARG BASE={default_base(environment)}",
        "FROM ${BASE} AS base",
        "ENV DEBIAN_FRONTEND=noninteractive LANG=C.UTF-8",
        f"COPY {EXTRA_CA} /etc/commitgym/{EXTRA_CA}",
        'RUN wanted="" \\',
        *(f'    && {{ {check} >/dev/null 2>&1 || wanted="$wanted {packages}"; }} \\' for check, packages in checks),
        '    && if [ -n "$wanted" ]; then apt-get update && apt-get install -y --no-install-recommends $wanted \\',
        "       && rm -rf /var/lib/apt/lists/*; fi \\",
        f"    && cat /etc/commitgym/{EXTRA_CA} >> /etc/ssl/certs/ca-certificates.crt",
        "ENV SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt PIP_CERT=/etc/ssl/certs/ca-certificates.crt",
    ]


# Run by the environment's Python in the build: uv's wheel for this machine from the index, checked
# against the index's SHA-256, its binary put on the PATH (no pip, no venv with pip: seconds saved).
UV_FETCH = """\
import hashlib, io, json, os, platform, ssl, sys, urllib.parse, urllib.request, zipfile
version, index = sys.argv[1], os.environ.get("UV_FETCH_INDEX", "https://pypi.org/simple/")
context = ssl.create_default_context(cafile=os.environ.get("SSL_CERT_FILE"))
page = urllib.parse.urljoin(index, "uv/")
asked = urllib.request.Request(page, headers={"Accept": "application/vnd.pypi.simple.v1+json"})
files = json.load(urllib.request.urlopen(asked, context=context))["files"]
wheel = next((f for f in files if f["filename"].startswith(f"uv-{version}-") and "manylinux" in f["filename"]
              and f["filename"].endswith(platform.machine() + ".whl")), None)
if wheel is None:
    sys.exit(f"the index {page} has no manylinux wheel of uv {version} for {platform.machine()}")
data = urllib.request.urlopen(urllib.parse.urljoin(page, wheel["url"]), context=context).read()
if hashlib.sha256(data).hexdigest() != wheel["hashes"]["sha256"]:
    sys.exit("uv's wheel does not match the index's SHA-256")
wheel_zip = zipfile.ZipFile(io.BytesIO(data))
binary = next(name for name in wheel_zip.namelist() if name.endswith("/scripts/uv"))
with open("/usr/local/bin/uv", "wb") as out:
    out.write(wheel_zip.read(binary))
os.chmod("/usr/local/bin/uv", 0o755)
"""


def _environment_stage(environment: EnvironmentToRelease) -> list[str]:
    """One step: the environment from the lock, then the project installed on its setup commit's
    tree, the files that install generated kept, and the tree removed."""
    python, folder = f"python{environment.python}", f"{ENVIRONMENTS}/{environment.key}"
    if environment.python2:  # Debian's virtualenv seeds pip from the image's own wheels, as the build did
        # pip builds an sdist with the environment's own setuptools: the lock's, first (as the build did).
        make = [f"python3 -m virtualenv --quiet --no-setuptools --no-wheel --no-periodic-update --python {python} "
                f"{ENV}", *map(shlex.join, lock_install_argv(environment))]
    else:
        make = [f"{python} /release/env/uv_fetch.py {environment.tool_version}",
                f"uv venv --quiet --python {python} {ENV}", *map(shlex.join, lock_install_argv(environment))]
    lines = ["FROM base AS environment", f"COPY {folder}/ /release/env/"]
    if environment.setup_archive:
        lines.append(f"COPY {environment.setup_archive} /release/setup.tar.gz")
        # Without git metadata, setuptools-scm and hatch-vcs take SETUPTOOLS_SCM_PRETEND_VERSION for the version.
        make += [f"mkdir -p {REPO} {GENERATED}",
                 f"tar -xzf /release/setup.tar.gz -C {REPO} --strip-components=1",
                 *(f"(cd {REPO} && SETUPTOOLS_SCM_PRETEND_VERSION=0.0.0 {command})"
                   for command in _project_install(environment)),
                 f"(cd {REPO} && xargs -a /release/env/generated -d '\\n' -r cp -a --parents -t {GENERATED} --)",
                 f"rm -rf {REPO} /release/setup.tar.gz"]
    steps = [f"RUN {make[0]}", *(f"    && {command}" for command in make[1:])]
    return [*lines, *(f"{step} \\" for step in steps[:-1]), steps[-1],
            f"ENV VIRTUAL_ENV={ENV} PATH={ENV}/bin:$PATH", f"WORKDIR {WORKSPACE}"]


def _task_stages(environment: EnvironmentToRelease) -> list[str]:
    folder = f"{ENVIRONMENTS}/{environment.key}"
    return [
        "FROM base AS source",
        "ARG TASK",
        f"COPY {folder}/tasks /release/tasks",
        "COPY sources/ /release/sources/",
        'RUN archive="$(awk -v id="$TASK" \'$1 == id { print $2 }\' /release/tasks)" \\',
        f'    && if [ -z "$archive" ]; then echo "no task $TASK uses this environment: see {folder}/tasks" >&2; '
        "exit 1; fi \\",
        f'    && mkdir -p {REPO} && tar -xzf "/release/$archive" -C {REPO} --strip-components=1',
        "",
        "FROM environment AS task",
        f"COPY --from=source {REPO} {REPO}",
        f"WORKDIR {REPO}",
        # Built on its setup commit's tree, the environment kept what the install wrote there; with no
        # archive of that tree, the project is installed on the task's.
        *([f"RUN cp -a {GENERATED}/. {REPO}/"] if environment.setup_archive else
          [f"RUN SETUPTOOLS_SCM_PRETEND_VERSION=0.0.0 {command}" for command in _project_install(environment)]),
    ]


def dockerfile(environment: EnvironmentToRelease, release: str) -> str:
    header = [
        f"# The environment {environment.key} of {release}: Python {environment.python_version}, built by "
        f"{environment.tool}, {len(environment.tasks)} task(s).",
        "# From the release folder (see README.md there):",
        f"#   docker build --network host -f {ENVIRONMENTS}/{environment.key}/Dockerfile "
        f"--build-arg BASE={default_base(environment)} --target environment .",
        f"#   docker build --network host -f {ENVIRONMENTS}/{environment.key}/Dockerfile "
        f"--build-arg BASE={default_base(environment)} --target task --build-arg TASK=<instance id> .",
    ]
    stages = [*_base_stage(environment), "", *_environment_stage(environment), "", *_task_stages(environment)]
    return "\n".join([*header, "", *stages]) + "\n"


def environment_folder_write(folder: Path, environment: EnvironmentToRelease, release: str) -> list[Path]:
    """The environment's files in `folder` (the release's): its Dockerfile, lock, tasks and generated files."""
    target = folder / ENVIRONMENTS / environment.key
    target.mkdir(parents=True)
    texts = {"Dockerfile": dockerfile(environment, release), "requirements.lock": release_lock(environment.lock, environment.hashes),
             "tasks": "".join(f"{instance} {archive}\n" for instance, archive in environment.tasks),
             "generated": "".join(f"{path}\n" for path in environment.generated),
             WORKING_COPY_PTH: working_copy_pth_line(REPO),
             **({SEED: release_lock("\n".join(line for line in environment.lock.splitlines() if _SEEDS.match(line)),
                                    environment.hashes)} if environment.python2 else {"uv_fetch.py": UV_FETCH})}
    written = []
    for name, text in texts.items():
        (target / name).write_text(text)
        written.append(target / name)
    return written


def release_readme(release: str, environments: list[EnvironmentToRelease]) -> str:
    """The release folder's README: how to build and run one task by hand, with nothing but the folder."""
    example = next((environment for environment in environments if environment.tasks), None)
    key = example.key if example else "<key>"
    task = shlex.quote(example.tasks[0][0]) if example else "<instance id>"
    base = default_base(example) if example else "debian:bookworm-slim"
    return "\n".join([
        f"# {release}",
        "",
        "Tasks in `instances.jsonl` (SWE-bench's fields; the same rows in `instances.parquet`); each task's",
        "environment in `environments/<key>/` (its `commitgym_environment_key`), the repository at each base",
        "commit in `sources/`, checksums in `manifest.json`. One task by hand, from this folder:",
        "",
        "```sh",
        f"docker build --network host -f environments/{key}/Dockerfile --build-arg BASE={base} "
        f"--target task --build-arg TASK={task} -t task .",
        "python3 -c 'import json, sys; t = next(t for t in map(json.loads, open(\"instances.jsonl\")) "
        "if t[\"instance_id\"] == sys.argv[1]); print(t[\"test_patch\"] + t[\"patch\"], end=\"\")' "
        f"{task} > fix.diff",
        "python3 -c 'import json, sys; t = next(t for t in map(json.loads, open(\"instances.jsonl\")) "
        "if t[\"instance_id\"] == sys.argv[1]); print(\" \".join(json.loads(t[\"FAIL_TO_PASS\"])))' "
        f"{task} > tests.txt",
        "docker run --rm -i --network none task sh -c 'git apply - && python -m pytest -rA -p no:cacheprovider "
        "$0' \"$(cat tests.txt)\" < fix.diff",
        "```",
        "",
        "Without `patch` in fix.diff (only `test_patch`), the same tests fail. Behind a TLS-inspecting proxy,",
        f"put its CA bundle in `{EXTRA_CA}` before building; where no registry is reachable, pass a local",
        "Debian image of the same release as BASE.",
        "",
    ])
