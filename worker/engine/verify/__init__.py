"""Choosing among a task's candidate patches: the judge, the selectors, best@k and the other measures."""
