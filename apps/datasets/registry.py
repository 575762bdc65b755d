"""What higher apps register with datasets at their `ready()` (apps.extension_points)."""

from apps.extension_points import ExtensionPoint

# `(dataset=, tasks=, user=, fingerprint=) -> dict`: more of a dataset page's context (what people's labels
# say); `fingerprint` is the page's scope_fingerprint of `tasks`, computed once.
DATASET_PAGE = ExtensionPoint("dataset page")
# `(task_ids=) -> {candidate id: (correct, source)}`: people's final labels, which the judge-training
# export prefers to the hidden tests' grade (the source says which it was).
PEOPLE_LABELS = ExtensionPoint("people's final labels")
