"""Environments as of a commit: the Pythons a sandbox has (runtimes), install recipes, the builder."""
