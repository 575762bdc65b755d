"""Pages of tasks (tasks.py) and of curation (curation.py), and what both share (common.py)."""
