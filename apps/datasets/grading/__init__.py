"""A candidate's ground truth: grading jobs (grades) and the hacking detector's flags (hacking)."""
