"""SWE-bench's files as people bring them: instance files, predictions files and evaluation reports,
read row by row into plain data. Each row is kept or refused with its reason; a file nothing could be
read from says why. Nothing here touches the database or runs anything.

Instances and predictions: `.jsonl` (one JSON object a line) or `.json` (a list; for predictions also
a dict keyed by instance id); instances also `.parquet`, as the Hugging Face copies ship.
`FAIL_TO_PASS` and `PASS_TO_PASS` come as JSON strings holding lists (SWE-bench's own dataset) or as
lists. A prediction whose `model_patch` is null or empty is "no patch".
An instance id seen twice in one file (for predictions: twice in one run) is a duplicate: the later
row wins, and the duplicate is reported.

Reports, each instance id to an outcome (GROUND_TRUTH_OUTCOMES), and how each field maps:
- the current harness's run report (`schema_version` 2): `resolved_ids` resolved; `unresolved_ids`
  no (the report does not say which tests passed, so never partial); `error_ids` error;
  `empty_patch_ids` no_patch; `submitted_ids` and `incomplete_ids` not in any of those: no ground
  truth (the evaluation did not finish them); `completed_ids` only confirms. commitgym's own run
  reports (`evaluate`) add `commitgym_outcomes`, each instance's whole outcome, taken where the
  lists agree with it.
- the older report of lists: `resolved` resolved; `no_apply` does_not_apply; `test_timeout` timeout;
  `test_errored` error; `applied` (or `generated`) without any of those: no; `no_generation`: no_patch.
- a folder of per-instance `report.json` files (`{id: {resolved, patch_successfully_applied,
  tests_status: {FAIL_TO_PASS: {success, failure}, PASS_TO_PASS: ...}}}`): resolved if `resolved`;
  does_not_apply if the patch did not apply; partial if some FAIL_TO_PASS test passed and no
  PASS_TO_PASS test failed; no otherwise.
"""

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Optional

MAX_PATCH_BYTES = 8 << 20  # a patch larger than this is refused: no fix of a task is that large
MAX_TEXT_BYTES = 1 << 20  # a problem statement or hints larger than this is refused
GROUND_TRUTH_OUTCOMES = ("resolved", "partial", "no", "no_patch", "does_not_apply", "error", "timeout", "untrusted")
INSTANCE_FIELDS = ("instance_id", "repo", "base_commit", "patch", "test_patch", "problem_statement")
MAX_ID_CHARS = 255  # an instance id, a run's name
MAX_REPO_CHARS = 200
_SHA = re.compile(r"[0-9a-f]{7,40}")


@dataclass(frozen=True)
class Instance:
    instance_id: str
    repo: str  # "owner/name"
    base_commit: str
    patch: str  # the gold patch
    test_patch: str
    problem_statement: str
    fail_to_pass: tuple[str, ...]  # test ids as given (often not pytest node ids: Django's, SymPy's)
    pass_to_pass: tuple[str, ...]
    hints_text: str = ""
    created_at: str = ""
    version: str = ""
    environment_setup_commit: str = ""


@dataclass(frozen=True)
class Prediction:
    instance_id: str
    run: str  # model_name_or_path, unless the import names the run
    patch: Optional[str]  # None: no patch


@dataclass(frozen=True)
class Refused:
    row: int  # 1-based: the line of a .jsonl file, the position in a .json list
    instance_id: str  # "" where the row does not say
    reason: str


@dataclass
class Rows:
    """What a file gave: the rows kept (the later winning), those refused and why. Rows are keyed by
    instance id; predictions by (run, instance id): one file may hold several runs."""

    rows: int = 0
    kept: dict = field(default_factory=dict)  # key -> Instance | Prediction
    row_of: dict = field(default_factory=dict)  # key -> the row it was kept from
    refused: list[Refused] = field(default_factory=list)
    duplicates: list = field(default_factory=list)  # keys seen more than once
    unreadable: str = ""  # why nothing could be read at all ("" when the file could be read)


class NotARow(ValueError):
    """A row refused, with the reason a person reads."""


def instances_read(path: Path) -> Rows:
    return _rows_read(path, _instance, keyed=False, parquet=True, what="instances")


def predictions_read(path: Path, *, run: str = "") -> Rows:
    return _rows_read(path, lambda row: _prediction(row, run), keyed=True, what="predictions")


def _rows_read(path: Path, make, *, keyed: bool, what: str, parquet: bool = False) -> Rows:
    found = Rows()
    path = Path(path)
    try:
        rows = list(_parquet_rows(path) if parquet and path.suffix == ".parquet" else _json_rows(path, keyed=keyed))
    except NotARow as unreadable:
        found.unreadable = str(unreadable)
        return found
    if not rows:  # an empty file, blank lines, [] or {}: most likely not the file meant
        found.unreadable = f"{path.name} holds no {what}: it has no rows"
        return found
    for number, row in rows:
        found.rows += 1
        try:
            if isinstance(row, NotARow):
                raise row
            made = make(row)
        except NotARow as refused:
            found.refused.append(Refused(number, _id_of(row), str(refused)))
            continue
        key = (made.run, made.instance_id) if isinstance(made, Prediction) else made.instance_id
        if key in found.kept:
            found.duplicates.append(key)
        found.kept[key] = made
        found.row_of[key] = number
    return found


def _json_rows(path: Path, *, keyed: bool) -> Iterator[tuple[int, object]]:
    """(row number, the row's JSON, or the NotARow that says why it is not one)."""
    try:
        data = path.read_bytes()
    except OSError as error:
        raise NotARow(f"{path.name} cannot be read: {error.strerror or error}")
    if path.suffix == ".jsonl":
        yield from _jsonl_rows(data)
        return
    if path.suffix != ".json":
        raise NotARow(f"{path.name}: a .jsonl or .json file is expected")
    try:
        document = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as error:
        raise NotARow(f"{path.name} is not JSON in UTF-8: {type(error).__name__}: {error}")
    if keyed and isinstance(document, dict):
        document = [{"instance_id": key, **value} if isinstance(value, dict) else NotARow(
            f"the value of {key!r} is not an object") for key, value in document.items()]
    if not isinstance(document, list):
        raise NotARow(f"{path.name} holds {type(document).__name__}, not a list of rows" +
                      (" or an object keyed by instance id" if keyed else ""))
    yield from enumerate(document, start=1)


def _parquet_rows(path: Path) -> Iterator[tuple[int, object]]:
    import pyarrow
    import pyarrow.parquet

    try:
        table = pyarrow.parquet.read_table(path)
    except (OSError, pyarrow.ArrowException) as error:
        raise NotARow(f"{path.name} is not a readable Parquet file: {error}")
    number = 0
    for batch in table.to_batches(max_chunksize=1000):
        for row in batch.to_pylist():
            number += 1
            yield number, row


def _jsonl_rows(data: bytes) -> Iterator[tuple[int, object]]:
    for number, line in enumerate(data.split(b"\n"), start=1):
        if not line.strip():
            continue
        try:
            yield number, json.loads(line.decode("utf-8"))
        except UnicodeDecodeError:
            yield number, NotARow(f"line {number} is not UTF-8")
        except (ValueError, RecursionError) as error:
            yield number, NotARow(f"line {number} is not JSON: {type(error).__name__}: {error}")


def _id_of(row) -> str:
    value = row.get("instance_id") if isinstance(row, dict) else None
    return value if isinstance(value, str) else ""


def _instance(row) -> Instance:
    if not isinstance(row, dict):
        raise NotARow("the row is not an object")
    missing = [name for name in INSTANCE_FIELDS if not isinstance(row.get(name), str) or not row[name]]
    if missing:
        raise NotARow(f"missing or not text: {', '.join(missing)}")
    for name in ("patch", "test_patch"):
        _size_check(name, row[name], MAX_PATCH_BYTES)
    for name in ("problem_statement", "hints_text"):
        _size_check(name, row.get(name) or "", MAX_TEXT_BYTES)
    if "/" not in row["repo"] or len(row["repo"]) > MAX_REPO_CHARS:
        raise NotARow(f"repo {row['repo'][:80]!r} is not owner/name (at most {MAX_REPO_CHARS} characters)")
    for name in ("instance_id", "repo"):
        _name_check(name, row[name])
    if not _SHA.fullmatch(row["base_commit"]):
        raise NotARow(f"base_commit {row['base_commit'][:80]!r} is not a commit's hex sha")
    return Instance(
        instance_id=row["instance_id"], repo=row["repo"], base_commit=row["base_commit"], patch=row["patch"],
        test_patch=row["test_patch"], problem_statement=row["problem_statement"],
        fail_to_pass=_test_ids(row, "FAIL_TO_PASS"), pass_to_pass=_test_ids(row, "PASS_TO_PASS"),
        hints_text=_text(row, "hints_text"), created_at=_text(row, "created_at"), version=_text(row, "version"),
        environment_setup_commit=_text(row, "environment_setup_commit"))


def _prediction(row, run: str) -> Prediction:
    if not isinstance(row, dict):
        raise NotARow("the row is not an object")
    if not isinstance(row.get("instance_id"), str) or not row["instance_id"]:
        raise NotARow("missing or not text: instance_id")
    name = run or row.get("model_name_or_path")
    if not isinstance(name, str) or not name:
        raise NotARow("missing or not text: model_name_or_path (or name the run)")
    _name_check("instance_id", row["instance_id"])
    _name_check("model_name_or_path", name)
    patch = row.get("model_patch")
    if patch is not None and not isinstance(patch, str):
        raise NotARow("model_patch is not text")
    _size_check("model_patch", patch or "", MAX_PATCH_BYTES)
    return Prediction(row["instance_id"], name, patch or None)


def _name_check(name: str, value: str) -> None:
    """An id or a name: printable text of at most MAX_ID_CHARS characters."""
    if len(value) > MAX_ID_CHARS:
        raise NotARow(f"{name} is longer than {MAX_ID_CHARS} characters")
    if not value.isprintable() or any(0xD800 <= ord(char) <= 0xDFFF for char in value):
        raise NotARow(f"{name} {value[:80]!r} holds characters that are not printable text")


def _size_check(name: str, text: str, limit: int) -> None:
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > limit:
        raise NotARow(f"{name} is {size / (1 << 20):.1f} MB, over the {limit >> 20} MB limit")


def _text(row: dict, name: str) -> str:
    value = row.get(name)
    return value if isinstance(value, str) else "" if value is None else str(value)


def _test_ids(row: dict, name: str) -> tuple[str, ...]:
    value = row.get(name, [])
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise NotARow(f"{name} is text but not a JSON list")
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise NotARow(f"{name} is not a list of test ids")
    return tuple(value)


# --- reports ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Report:
    shape: str  # "run_report", "lists", "report_folder"
    outcomes: dict  # instance id -> one of GROUND_TRUTH_OUTCOMES
    # What a submitted prediction the report does not name is: in the older report of lists, which may
    # list only `resolved` (with `generated` and `applied` as counts), it is unresolved (SWE-bench's
    # rule); the other shapes name every prediction they evaluated, so one they do not name is unknown ("").
    unlisted: str = ""


def report_read(path: Path) -> Report:
    """A report in any of the three shapes; NotARow where it is none of them."""
    path = Path(path)
    if path.is_dir():
        return Report("report_folder", _folder_outcomes(path))
    try:
        document = json.loads(path.read_bytes().decode("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as error:
        raise NotARow(f"{path.name} is not a readable JSON report: {error}")
    if not isinstance(document, dict):
        raise NotARow(f"{path.name} is not a report: it holds {type(document).__name__}")
    if "resolved_ids" in document:
        return Report("run_report", _run_report_outcomes(document))
    if "resolved" in document and isinstance(document["resolved"], list):
        return Report("lists", _lists_outcomes(document), unlisted="no")
    if document and all(isinstance(value, dict) and "resolved" in value for value in document.values()):
        return Report("report_folder", _per_instance_outcomes(document))
    raise NotARow(f"{path.name} is none of the report shapes (a run report with resolved_ids, the older "
                  "report of lists, or per-instance report.json files)")


def _ids(document: dict, name: str) -> list[str]:
    value = document.get(name) or []
    return [item for item in value if isinstance(item, str)] if isinstance(value, list) else []


def _run_report_outcomes(document: dict) -> dict:
    outcomes = {}
    for name, outcome in (("unresolved_ids", "no"), ("error_ids", "error"), ("empty_patch_ids", "no_patch"),
                          ("resolved_ids", "resolved")):
        outcomes.update(dict.fromkeys(_ids(document, name), outcome))
    # commitgym's own run reports keep each outcome whole (partial, does_not_apply...): those of the
    # instances the lists name, where the lists agree with them, are taken.
    own = document.get("commitgym_outcomes")
    for instance_id, outcome in (own.items() if isinstance(own, dict) else ()):
        if instance_id in outcomes and outcome in GROUND_TRUTH_OUTCOMES and _run_report_place(outcome) == \
                outcomes[instance_id]:
            outcomes[instance_id] = outcome
    return outcomes


def _run_report_place(outcome: str) -> str:
    """Where a run report lists an instance of this outcome, as its outcome from the lists alone."""
    return {"resolved": "resolved", "no_patch": "no_patch", "partial": "no", "no": "no",
            "untrusted": "no"}.get(outcome, "error")


def _lists_outcomes(document: dict) -> dict:
    outcomes = dict.fromkeys(_ids(document, "no_generation"), "no_patch")
    outcomes.update(dict.fromkeys(_ids(document, "generated") + _ids(document, "applied"), "no"))
    for name, outcome in (("test_errored", "error"), ("test_timeout", "timeout"), ("no_apply", "does_not_apply"),
                          ("resolved", "resolved")):
        outcomes.update(dict.fromkeys(_ids(document, name), outcome))
    return outcomes


def _folder_outcomes(folder: Path) -> dict:
    outcomes = {}
    for report in sorted(folder.rglob("report.json")):
        if report.is_symlink() or not report.is_file():
            continue
        try:
            document = json.loads(report.read_bytes().decode("utf-8"))
        except (OSError, UnicodeDecodeError, ValueError, RecursionError):
            continue
        if isinstance(document, dict):
            outcomes.update(_per_instance_outcomes(document))
    return outcomes


def _per_instance_outcomes(document: dict) -> dict:
    outcomes = {}
    for instance_id, report in document.items():
        if not isinstance(report, dict):
            continue
        status = report.get("tests_status") if isinstance(report.get("tests_status"), dict) else {}
        fail_to_pass, pass_to_pass = status.get("FAIL_TO_PASS") or {}, status.get("PASS_TO_PASS") or {}
        if report.get("resolved") is True:
            outcomes[instance_id] = "resolved"
        elif report.get("patch_successfully_applied") is False:
            outcomes[instance_id] = "does_not_apply"
        elif isinstance(fail_to_pass, dict) and isinstance(pass_to_pass, dict) and fail_to_pass.get("success") \
                and not pass_to_pass.get("failure"):
            outcomes[instance_id] = "partial"
        else:
            outcomes[instance_id] = "no"
    return outcomes
