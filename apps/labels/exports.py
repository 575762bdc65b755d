"""`export_labels`: every label of a dataset, with its rationale, confidence, time, annotator, the
candidate's final label and who settled it, written by a job to a file (JSON lines or CSV)."""

import csv
import hashlib
import hmac
import io
import os
from pathlib import Path

from django.conf import settings
from django.core.management.base import CommandError
from django.db import transaction
from django.urls import reverse

from apps.datasets.models import Dataset
from apps.jobs.on_demand import job_waited
from apps.jobs.services import job_start
from worker.engine.release.writers import json_line

from .models import Label, LabelExport
from .selectors import final_labels

CHUNK = 2000
COLUMNS = ("label_id", "instance_id", "candidate_id", "annotator", "verdict", "confidence", "rationale", "lines",
           "seconds", "labelled_at", "control", "control_answer", "queue_order", "final_label", "final_status",
           "settled_by", "settlement_note", "settled_at")


def label_export_page(job) -> str:
    """The labels page of the dataset whose labels a job exports."""
    export = LabelExport.objects.filter(pk=job.subject_id).only("dataset_id").first()
    return reverse("labels:dataset", args=[export.dataset_id]) if export else ""


def pseudonym(user_id: int) -> str:
    """The same person gets the same pseudonym in every export of this site, and no one can tell who
    it is without the site's secret key."""
    digest = hmac.new(settings.SECRET_KEY.encode(), f"annotator:{user_id}".encode(), hashlib.sha256).hexdigest()
    return f"annotator-{digest[:10]}"


def label_export_start(*, dataset: Dataset, format: str, pseudonymize: bool, user=None) -> LabelExport:
    if format not in LabelExport.Format.values:
        raise CommandError(f"unknown format {format!r}: choose jsonl or csv")
    with transaction.atomic():  # the job's message goes out once its row and the export's are both stored
        export = LabelExport.objects.create(dataset=dataset, format=format, pseudonymize=pseudonymize,
                                            created_by=user if getattr(user, "pk", None) else None)
        export.job, _ = job_start(kind="label_export", subject=export, user=user)
        export.save(update_fields=["job"])
    return export


def _who(user_id, pseudonymize: bool):
    if user_id is None:
        return None
    return pseudonym(user_id) if pseudonymize else user_id


def _rows(labels: list, finals: dict, pseudonymize: bool) -> list[dict]:
    rows = []
    for label in labels:
        final, _, settlement = finals.get(label.candidate_id, (None, None, None))
        rows.append({
            "label_id": label.id, "instance_id": label.candidate.task.instance_id, "candidate_id": label.candidate_id,
            "annotator": _who(label.annotator_id, pseudonymize), "verdict": label.verdict,
            "confidence": label.confidence, "rationale": label.rationale, "lines": label.lines,
            "seconds": round(label.seconds, 3), "labelled_at": label.created_at.isoformat(), "control": label.control,
            "control_answer": label.answer or None, "queue_order": label.order,
            "final_label": final.verdict if final else None, "final_status": final.status if final else None,
            "settled_by": _who(settlement.settled_by_id, pseudonymize) if settlement else None,
            "settlement_note": settlement.note if settlement else None,
            "settled_at": settlement.created_at.isoformat() if settlement else None})
    return rows


def _csv_text(rows: list[dict], *, header: bool) -> bytes:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=COLUMNS)
    if header:
        writer.writeheader()
    for row in rows:
        writer.writerow({**row, "lines": " ".join(f"{pin['path']}:{pin['line']}" for pin in row["lines"])})
    return out.getvalue().encode()


def label_export_work(job, progress) -> None:
    """The registered `run` of a label export: its rows written to a file of its own, put in place
    only when whole (a retried job writes it again from the start)."""
    export = LabelExport.objects.select_related("dataset").get(job=job)
    folder = Path(settings.COMMITGYM_RELEASE_DIR) / "labels"
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"labels-{export.dataset_id}-{export.id}.{export.format}"
    partial = folder / f".{target.name}.job{job.id}-{progress.lease.token[:12]}"
    ids = list(Label.objects.filter(dataset=export.dataset).order_by("created_at", "id").values_list("id", flat=True))
    progress.report(0, len(ids))
    with open(partial, "wb") as out:
        if export.format == LabelExport.Format.CSV:
            out.write(_csv_text([], header=True))
        for start in range(0, len(ids), CHUNK):
            labels = list(Label.objects.filter(id__in=ids[start:start + CHUNK]).select_related("candidate__task")
                          .order_by("created_at", "id"))
            rows = _rows(labels, final_labels({label.candidate_id for label in labels}), export.pseudonymize)
            out.write(_csv_text(rows, header=False) if export.format == LabelExport.Format.CSV else
                      b"".join(json_line(row) for row in rows))
            progress.report(start + len(labels), len(ids))

    def store():
        os.replace(partial, target)
        LabelExport.objects.filter(pk=export.pk).update(path=str(target), rows=len(ids))

    try:
        progress.complete(store)
    finally:
        partial.unlink(missing_ok=True)


def label_export_waited(export: LabelExport, *, stderr, timeout: float) -> LabelExport:
    """For the command: wait for the export's job (a worker started for it on the embedded default)."""
    job_waited(export.job_id, queues="curation", what="the label export", stderr=stderr, timeout=timeout)
    return LabelExport.objects.select_related("job").get(id=export.id)
