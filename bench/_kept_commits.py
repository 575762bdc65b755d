"""The commits of a history the mining filters keep, as the benches that build environments read them."""

from datetime import datetime
from pathlib import Path

from worker.engine.git.repo import BlobReader
from worker.engine.mine.filters import MiningFilters, drop_reason, size_drop_reason
from worker.engine.mine.walk import MinedCommit, commits_walk, python_changes_checked


def kept_commits(mirror: Path, tip: str) -> list[tuple[str, str, datetime]]:
    """The commits the mining filters' defaults keep (with a parent), oldest first, as (sha, parent,
    committer date)."""
    filters = MiningFilters()

    def needs_check(mined: MinedCommit) -> bool:
        return bool(mined.stats.source_file_count) and not size_drop_reason(mined.stats, filters)

    kept = []
    with BlobReader(mirror) as blobs:
        walk = commits_walk(mirror, tip, hunks_up_to=filters.max_patch_chars)
        try:
            for mined in python_changes_checked(walk, blobs, needs_check=needs_check):
                if mined.parent_sha and not drop_reason(mined.stats, filters):
                    # The walk's committed_at is git's %cI, as `git show -s --format=%cI SHA` says it.
                    kept.append((mined.sha, mined.parent_sha, datetime.fromisoformat(mined.committed_at)))
        finally:
            walk.close()
    kept.reverse()
    return kept
