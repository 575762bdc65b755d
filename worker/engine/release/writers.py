"""Writing a release's files as rows arrive, each file's checksum taken as it is written: JSON
lines (ASCII only, so that a reader splitting on any line break, as SWE-bench's loader does with
str.splitlines, reads one row a line) and Parquet in row groups. Nothing is held whole in memory."""

import hashlib
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:
    import pyarrow

MANIFEST = "manifest.json"


@dataclass(frozen=True)
class WrittenFile:
    name: str  # in the release's folder
    bytes: int
    sha256: str
    rows: Optional[int] = None  # None for the manifest

    def described(self) -> dict:
        return asdict(self)


def json_line(row: dict) -> bytes:
    return json.dumps(row, ensure_ascii=True).encode("ascii") + b"\n"


class JsonLines:
    """A JSON-lines file, hashed as it is written."""

    def __init__(self, path: Path):
        self.path, self.rows, self.size = Path(path), 0, 0
        self._hash = hashlib.sha256()
        self._file = open(self.path, "xb")

    def write(self, rows: list[dict]) -> None:
        data = b"".join(json_line(row) for row in rows)
        self._file.write(data)
        self._hash.update(data)
        self.rows += len(rows)
        self.size += len(data)

    def close(self) -> WrittenFile:
        self._file.close()
        return WrittenFile(self.path.name, self.size, self._hash.hexdigest(), self.rows)


class ParquetRows:
    """A Parquet file of rows of `schema` (records.release_schema()), one row group per write."""

    def __init__(self, path: Path, schema: "pyarrow.Schema"):
        import pyarrow.parquet  # here, not at a command's start (records.release_schema)

        self.path, self.schema, self.rows = Path(path), schema, 0
        self._file = open(self.path, "xb")  # never over an existing file
        self._writer = pyarrow.parquet.ParquetWriter(self._file, schema, compression="zstd")

    def write(self, rows: list[dict]) -> None:
        import pyarrow

        if rows:
            # By columns: Table.from_pylist would import pandas (a second and a half, once).
            columns = {name: [row[name] for row in rows] for name in self.schema.names}
            self._writer.write_table(pyarrow.Table.from_pydict(columns, schema=self.schema))
            self.rows += len(rows)

    def close(self) -> WrittenFile:
        self._writer.close()
        self._file.close()
        return WrittenFile(self.path.name, self.path.stat().st_size, file_sha256(self.path), self.rows)


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        while chunk := file.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def manifest_write(folder: Path, manifest: dict, *, replacing: bool = False) -> WrittenFile:
    """The manifest, beside the files it lists (their checksums in it); its own checksum is kept
    where the release is recorded. `replacing` a written release's (to note what was built from it):
    the new one takes the old one's place whole, never half written."""
    data = json.dumps(manifest, indent=2, sort_keys=True, ensure_ascii=False).encode("utf-8") + b"\n"
    path = Path(folder) / MANIFEST
    written = path.with_name(f".{MANIFEST}.new") if replacing else path
    with open(written, "wb" if replacing else "xb") as file:
        file.write(data)
        file.flush()
        os.fsync(file.fileno())
    if replacing:
        os.replace(written, path)
    return WrittenFile(MANIFEST, len(data), hashlib.sha256(data).hexdigest())


def files_check(folder: Path, files: list[dict]) -> list[str]:
    """What is wrong with a written release's files now: missing, a link or out of the folder (a folder
    from elsewhere may be anything), or not the bytes it wrote."""
    problems, top = [], Path(folder).resolve()
    for described in files:
        path = Path(folder) / described["name"]
        if path.is_symlink() or not path.resolve().is_relative_to(top):
            problems.append(f"{described['name']} is a link, or leads out of the release's folder")
        elif not path.is_file():
            problems.append(f"{described['name']} is missing")
        elif path.stat().st_size != described["bytes"] or file_sha256(path) != described["sha256"]:
            problems.append(f"{described['name']} is not the file that was released (its checksum differs)")
    return problems
