"""The engine: plain Python, no Django, plain data in and out; a package per stage of the data flow.

    git/ ─► mine/ ─► env/ (in sandbox/) ─► run/ ─► validate/ ─► llm/ ─► curate/, label/

`reasons.py` holds the reason codes every stage gives. The Two-Judge Bench adds `grade/` (a
candidate's ground truth), `verify/` (the verifiers, selectors, best@k) and `release/` (datasets).
"""
