"""Imports started from the datasets page. The files a person uploads are checked at once where
that is cheap (names, sizes, the report's shape), kept under COMMITGYM_UPLOAD_DIR and imported by a
job on the `curation` queue: the same import the commands run. The upload's page follows the job and
shows the import's counts when it ends. Workers of that queue must see the folder (shared storage
when they run on other machines). Once imported, the files are removed; a failed import keeps them
for a retry. A file too large to send is named instead where it lies on the server (in_place.py),
imported by a kind of its own with the same import and the same retry."""

import shutil
import uuid
from pathlib import Path
from typing import Optional

from django.conf import settings
from django.db import transaction

from apps.jobs.services import JobFailed, job_start
from worker.engine.grade.swebench import NotARow, report_read

from .imports import ImportUnreadable, instances_import, predictions_import
from ..models import Upload

INSTANCE_SUFFIXES = (".jsonl", ".json", ".parquet")
PREDICTION_SUFFIXES = (".jsonl", ".json")
TRAJECTORY_SUFFIXES = (".jsonl", ".traj")


class UploadRefused(ValueError):
    """Files that cannot be imported as given; the message says why."""


def upload_start(*, kind: str, file, report=None, trajectories=(), dataset_name: str = "", run_name: str = "",
                 user=None) -> Upload:
    """Keep the files and queue their import; UploadRefused, with nothing kept, when they cannot be."""
    _files_check(kind, file, report, list(trajectories))
    folder = Path(settings.COMMITGYM_UPLOAD_DIR) / uuid.uuid4().hex
    try:
        saved = _files_save(folder, file, report, list(trajectories))
        with transaction.atomic():
            upload = Upload.objects.create(kind=kind, folder=str(folder), created_by=user, dataset_name=dataset_name,
                                           run_name=run_name, **saved)
            upload.job, _ = job_start(kind="upload_import", subject=upload, user=user)
            upload.save(update_fields=["job"])
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return upload


def _files_check(kind: str, file, report, trajectories: list) -> None:
    if kind not in Upload.Kind.values:
        raise UploadRefused("Say whether the file holds instances or predictions.")
    if file is None:
        raise UploadRefused("Choose the file to import.")
    suffixes = INSTANCE_SUFFIXES if kind == Upload.Kind.INSTANCES else PREDICTION_SUFFIXES
    _named(file, suffixes, what=f"an {kind} file" if kind == "instances" else f"a {kind} file")
    if kind == Upload.Kind.INSTANCES and (report or trajectories):
        raise UploadRefused("A report and trajectories go with a predictions file, not with instances.")
    if report is not None:
        _named(report, (".json",), what="a report")
    for trajectory in trajectories:
        _named(trajectory, TRAJECTORY_SUFFIXES, what="a trajectory")
    total = sum(f.size for f in (file, report, *trajectories) if f is not None)
    if total > settings.COMMITGYM_UPLOAD_MAX_BYTES:
        raise UploadRefused(f"The files come to {total / 1e6:,.1f} MB; at most "
                            f"{settings.COMMITGYM_UPLOAD_MAX_BYTES / 1e6:,.0f} MB are imported from the page. "
                            "Larger files: manage.py import_instances or import_predictions on the server.")
    if report is not None:
        _report_check(report)


def _named(uploaded, suffixes: tuple, *, what: str) -> None:
    name = Path(uploaded.name or "").name
    if Path(name).suffix.lower() not in suffixes:
        raise UploadRefused(f"{name or 'The file'}: {what} is expected as {', '.join(suffixes)}.")
    if not uploaded.size:
        raise UploadRefused(f"{name} is empty.")


def _report_check(report) -> None:
    """A report is small and read whole: say at once when it is none of the report shapes."""
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / Path(report.name).name
        _copy(report, path)
        try:
            report_read(path)
        except NotARow as refused:
            raise UploadRefused(str(refused)) from None


def _files_save(folder: Path, file, report, trajectories: list) -> dict:
    folder.mkdir(parents=True)
    saved = {"file_name": _copy(file, folder / "file" / Path(file.name).name).name}
    if report is not None:
        saved["report_name"] = _copy(report, folder / "report" / Path(report.name).name).name
    names = []
    for trajectory in trajectories:
        target = folder / "trajectories" / Path(trajectory.name).name
        if target.exists():
            raise UploadRefused(f"Two trajectory files are named {target.name}.")
        names.append(_copy(trajectory, target).name)
    saved["trajectory_names"] = names
    return saved


def _copy(uploaded, target: Path) -> Path:
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target, "xb") as out:
        for chunk in uploaded.chunks():
            out.write(chunk)
    return target


def upload_import_work(job, progress) -> None:
    """The registered `run` of an upload's import. Run twice, the second finds the import made."""
    upload = Upload.objects.select_related("created_by").get(job=job)
    if upload.imported_id:
        return
    if upload.on_server:  # never removed: imported by its own kind (in_place.py), never from here
        raise JobFailed("upload_missing", "this import names a file on the server: it is imported in place")
    folder = Path(upload.folder)
    if not (folder / "file" / upload.file_name).is_file():
        raise JobFailed("upload_missing", f"the uploaded files are not in {folder} on this worker (they are kept "
                                          "where the web server saved them: COMMITGYM_UPLOAD_DIR must be shared)")
    trajectories = None
    if upload.trajectory_names:
        trajectories = folder / "trajectories"
        if len(upload.trajectory_names) == 1:
            trajectories = trajectories / upload.trajectory_names[0]
    imported = upload_files_import(upload, folder / "file" / upload.file_name,
                                   folder / "report" / upload.report_name if upload.report_name else None,
                                   trajectories)
    progress.complete(lambda: Upload.objects.filter(id=upload.id).update(imported=imported))
    shutil.rmtree(folder, ignore_errors=True)


def upload_files_import(upload: Upload, path: Path, report: Optional[Path], trajectories: Optional[Path]):
    """The import an upload asks for, of these files: its Import; JobFailed when they cannot be read."""
    try:
        if upload.kind == Upload.Kind.INSTANCES:
            return instances_import(path=path, dataset_name=upload.dataset_name, user=upload.created_by)
        imported, _ = predictions_import(path=path, run_name=upload.run_name, user=upload.created_by,
                                         report_path=report, trajectories_path=trajectories)
        return imported
    except ImportUnreadable as unreadable:
        raise JobFailed("import_unreadable", f"nothing imported: {unreadable}") from None


def upload_import_retry(job, user):
    """The registered `retry` of an import that failed: the same files, imported again."""
    upload = Upload.objects.get(job=job)
    with transaction.atomic():
        upload.job, _ = job_start(kind=job.kind, subject=upload, user=user)
        upload.save(update_fields=["job"])
    return upload.job
