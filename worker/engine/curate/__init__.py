"""Curation: the review rubric and how reviews merge."""
