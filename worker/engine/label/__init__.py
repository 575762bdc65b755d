"""Agreement between people who judge the same thing (reviewers of tasks; annotators of patches)."""
