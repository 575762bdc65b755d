"""The verifiers and what they measure: the judge's jobs (judging), the execution verifier's jobs
(execution) and stored matrices (matrices), best@k and the other measures over a scope (measures)."""
