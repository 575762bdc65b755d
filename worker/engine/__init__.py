"""The engine: plain Python, no Django, plain data in and out; a package per stage of the data flow.

    git/ ─► mine/ ─► env/ (in sandbox/) ─► run/ ─► validate/ ─► llm/ ─► curate/, label/

`reasons.py` holds the reason codes every stage gives, `test_files.py` which files are tests. The
Two-Judge Bench adds `grade/` (a candidate's ground truth), `verify/` (the verifiers, selectors,
best@k) and `release/` (datasets).

Each stage imports only those below it: sandbox → git → mine → run → env | llm → validate → grade →
verify | sample; release, curate, label, reasons and test_files stand beside them and import none
(pyproject.toml's import-linter contracts).
"""
