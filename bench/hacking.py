"""The hacking detector (worker/engine/grade/hacking.py) over real agents' patches: how many it flags.

Goal (issue: grades hostile candidates cannot forge): under 1% of real agents' patches flagged, every
flag read by a person. The patches are SWE-bench predictions files (`.jsonl`, or `.json` holding a list
or an object keyed by instance id) in the folder BENCH_HACKING_DIR; the same patch in several files
counts once. The baseline is the share flagged among human fixes: the gold patches of SWE-bench
instance files, or predictions files, in BENCH_HACKING_GOLD (a folder). Without BENCH_HACKING_DIR the
sample repository's own commits stand for both (a smoke run).

The detector reads each diff without the repository's files here (as an import does), so it parses
fragments of the diff; grading parses each file whole. BENCH_HACKING_FLAGS, a file name, gets every
flag as a JSON line, to read them.

Figures: the share of patches flagged (baseline: the share of gold patches flagged), and the
detector's time per patch (baseline: `ast.parse` of the same patches' added lines alone).
"""

import ast
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import report  # noqa: E402
from unidiff import PatchSet  # noqa: E402
from unidiff.errors import UnidiffParseError  # noqa: E402

from worker.demo.sample_repo import sample_repo_write  # noqa: E402
from worker.engine.grade.hacking import patch_hacking_flags  # noqa: E402
from worker.engine.grade.source_edits import added_lines  # noqa: E402


def patches_in(folder: Path) -> list[str]:
    """Every distinct patch of the folder's predictions (`model_patch`) or instance (`patch`) files, every
    row of them (a file may hold one agent's several attempts at an instance)."""
    found = {}
    for path in sorted(folder.rglob("*")):
        if path.suffix not in (".jsonl", ".json") or not path.is_file():
            continue
        for row in rows_of(path):
            patch = row.get("model_patch", row.get("patch")) if isinstance(row, dict) else None
            if isinstance(patch, str) and patch.strip():
                found.setdefault(patch.strip() + "\n", None)
    return list(found)


def rows_of(path: Path) -> list:
    text = path.read_bytes().decode("utf-8", "replace")
    if path.suffix == ".json":
        try:
            document = json.loads(text)
        except ValueError:
            return []
        return document if isinstance(document, list) else list(document.values()) if isinstance(document, dict) \
            else []
    rows = []
    for line in text.splitlines():
        try:
            rows.append(json.loads(line))
        except ValueError:
            continue
    return rows


def sample_patches() -> list[str]:
    with tempfile.TemporaryDirectory() as folder:
        repo = Path(folder) / "textkit"
        commits = sample_repo_write(repo)
        return [subprocess.run(["git", "-C", str(repo), "show", "--format=", commit.sha], capture_output=True,
                               check=True).stdout.decode("utf-8", "replace") for commit in commits[1:]]


def flagged(patches: list[str]) -> tuple[list, float]:
    """[(patch number, flags)] of the patches flagged, and the seconds it took."""
    started = time.perf_counter()
    found = [(number, flags) for number, patch in enumerate(patches) if (flags := patch_hacking_flags(patch))]
    return found, time.perf_counter() - started


def parse_seconds(patches: list[str]) -> float:
    """`ast.parse` of each patch's added lines alone, file by file: the least reading them costs."""
    started = time.perf_counter()
    for patch in patches:
        try:
            files = PatchSet(patch)
        except UnidiffParseError:
            continue
        for patched in files:
            try:
                ast.parse(textwrap.dedent("".join(line.value for hunk in patched for line in hunk if line.is_added)))
            except (SyntaxError, ValueError):
                pass
    return time.perf_counter() - started


def main() -> None:
    folder, gold_folder = os.environ.get("BENCH_HACKING_DIR"), os.environ.get("BENCH_HACKING_GOLD")
    if folder:
        patches = patches_in(Path(folder))
        gold = patches_in(Path(gold_folder)) if gold_folder else []
    else:
        print("hacking: BENCH_HACKING_DIR is not set: the sample repository's commits stand for real patches",
              file=sys.stderr)
        patches = gold = sample_patches()
    if not patches:
        sys.exit(f"hacking: no patch found in {folder}")
    found, seconds = flagged(patches)
    gold_found, _ = flagged(gold)
    python = sum(bool(added_lines(patch)) for patch in patches)
    reasons = Counter(flag.reason for _, flags in found for flag in {flag.reason: flag for flag in flags}.values())
    print(f"hacking: {len(patches)} distinct patches ({python} adding lines to a file), {len(found)} flagged; per reason "
          f"(patches): {dict(sorted(reasons.items()))}; gold: {len(gold_found)} of {len(gold)} flagged",
          file=sys.stderr)
    if os.environ.get("BENCH_HACKING_FLAGS"):
        with open(os.environ["BENCH_HACKING_FLAGS"], "w") as out:
            for number, flags in [*found, *[(f"gold-{n}", flags) for n, flags in gold_found]]:
                for flag in flags:
                    out.write(json.dumps({"patch": number, **flag.as_json()}) + "\n")
    share = 100 * len(found) / len(patches)
    gold_share = 100 * len(gold_found) / len(gold) if gold else 0.0
    report("hacking_flagged_share", share, "%", gold_share, "% of gold patches")
    report("hacking_ms_per_patch", 1000 * seconds / len(patches), "ms", 1000 * parse_seconds(patches) / len(patches),
           "ms to parse the added lines")


if __name__ == "__main__":
    main()
