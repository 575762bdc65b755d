"""Repository reads (mirrors, commits, blobs), a commit's patches, and working copies of a commit."""
