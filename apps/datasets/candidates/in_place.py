"""Imports of files where they lie on the server (the API's imports): a file too large to send is put
in one of COMMITGYM_IMPORT_ROOTS and named by its path. Nothing is said of a path elsewhere, not even
whether it exists; the file is read there and left there. Curators may be able to write in those
folders, so a path is trusted only as the open file it led to: the file is opened once, checked
where it really lies, and read through that open file (a link swapped in later leads nowhere new)."""

import os
import stat
import tempfile
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Iterator

from django.conf import settings
from django.db import transaction

from apps.jobs.services import JobFailed, job_start
from worker.engine.grade.swebench import NotARow, report_read

from ..models import Upload
from .uploads import INSTANCE_SUFFIXES, PREDICTION_SUFFIXES, UploadRefused, upload_files_import

PATH_IMPORT = "path_import"  # the job kind (registered in apps.datasets.apps)
REPORT_MAX_BYTES = 64 << 20  # a report is read whole by the web process: larger is not a report


def path_import_start(*, kind: str, path: str, report_path: str = "", dataset_name: str = "", run_name: str = "",
                      user=None) -> Upload:
    """Queue the import of a file where it lies on the server (no size cap); UploadRefused, with nothing
    queued, when it cannot be."""
    if kind not in Upload.Kind.values:
        raise UploadRefused("Say whether the file holds instances or predictions.")
    if kind == Upload.Kind.INSTANCES and report_path:
        raise UploadRefused("A report goes with a predictions file, not with instances.")
    file = server_file(path, _suffixes(kind), what=f"an {kind} file" if kind == "instances" else f"a {kind} file")
    report = _report_checked(report_path) if report_path else None
    with transaction.atomic():
        upload = Upload.objects.create(kind=kind, folder="", file_name=str(file), report_name=str(report or ""),
                                       on_server=True, created_by=user, dataset_name=dataset_name,
                                       run_name=run_name)
        upload.job, _ = job_start(kind=PATH_IMPORT, subject=upload, user=user)
        upload.save(update_fields=["job"])
    return upload


def server_file(text: str, suffixes: tuple, *, what: str) -> Path:
    """Where a path leads, links followed, when that is a file under one of COMMITGYM_IMPORT_ROOTS."""
    roots = _roots()
    path = Path(text)
    if not path.is_absolute() or ".." in path.parts:
        raise UploadRefused(f"{text or 'The path'}: name the file by its absolute path on the server, with no '..'.")
    resolved = path.resolve()
    if not _under(resolved, roots):
        raise UploadRefused(f"{text} is not under a folder this server imports from "
                            f"({', '.join(str(root) for root in roots)}).")
    if len(str(resolved)) > Upload._meta.get_field("file_name").max_length:
        raise UploadRefused(f"{resolved}: a path this long is not kept; move the file higher up.")
    try:
        if not resolved.is_file():
            raise UploadRefused(f"{text}: there is no file there.")
        size = resolved.stat().st_size
    except OSError as error:
        raise UploadRefused(f"{text}: the file cannot be read ({error.strerror}).") from None
    if resolved.suffix.lower() not in suffixes:
        raise UploadRefused(f"{resolved.name}: {what} is expected as {', '.join(suffixes)}.")
    if not size:
        raise UploadRefused(f"{resolved.name} is empty.")
    return resolved


@contextmanager
def server_file_held(path: Path) -> Iterator[Path]:
    """The file `server_file` found at `path`, opened once and checked as the open file (a regular file,
    under the roots where it really lies), as a path that leads to that open file whatever `path` leads
    to later: a link of the same name, in a folder of ours, to /proc/self/fd/N."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as error:
        raise UploadRefused(f"{path}: the file cannot be opened ({error.strerror}).") from None
    try:
        where = Path(os.readlink(f"/proc/self/fd/{descriptor}"))
        if not stat.S_ISREG(os.fstat(descriptor).st_mode) or not _under(where, _roots()):
            raise UploadRefused(f"{path} changed while it was opened: it is not a file under a folder this "
                                "server imports from.")
        with tempfile.TemporaryDirectory(prefix="commitgym-import-") as folder:
            held = Path(folder) / path.name
            held.symlink_to(f"/proc/self/fd/{descriptor}")
            yield held
    finally:
        os.close(descriptor)


def path_import_work(job, progress) -> None:
    """The registered `run`: the file (and report) read through the files held open, never removed.
    Run twice, the second finds the import made."""
    upload = Upload.objects.select_related("created_by").get(job=job)
    if upload.imported_id:
        return
    try:
        file_path = server_file(upload.file_name, _suffixes(upload.kind), what="the file")
        report_path = server_file(upload.report_name, (".json",), what="a report") if upload.report_name else None
        with server_file_held(file_path) as file, \
                (server_file_held(report_path) if report_path else nullcontext()) as report:
            imported = upload_files_import(upload, file, report, None)
    except UploadRefused as refused:
        raise JobFailed("upload_missing", f"nothing imported: {refused}") from None
    progress.complete(lambda: Upload.objects.filter(id=upload.id).update(imported=imported))


def _report_checked(text: str) -> Path:
    """Where the report lies: it is small and read whole here, to say at once when it is none of the
    report shapes."""
    path = server_file(text, (".json",), what="a report")
    with server_file_held(path) as report:
        if report.stat().st_size > REPORT_MAX_BYTES:
            raise UploadRefused(f"{path.name} is larger than {REPORT_MAX_BYTES >> 20} MiB: not a report.")
        try:
            report_read(report)
        except NotARow as refused:
            raise UploadRefused(str(refused)) from None
    return path


def _suffixes(kind: str) -> tuple:
    return INSTANCE_SUFFIXES if kind == Upload.Kind.INSTANCES else PREDICTION_SUFFIXES


def _roots() -> list[Path]:
    roots = [Path(root).resolve() for root in settings.COMMITGYM_IMPORT_ROOTS]
    if not roots:
        raise UploadRefused("This server imports no file in place: COMMITGYM_IMPORT_ROOTS names no folder. "
                            "Upload the file instead.")
    return roots


def _under(path: Path, roots: list[Path]) -> bool:
    return any(path.is_relative_to(root) for root in roots)
