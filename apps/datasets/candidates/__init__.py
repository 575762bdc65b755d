"""Where candidates come from: SWE-bench files (imports), the datasets page's uploads of them, the built-in
sampler (sampling), mutants of the gold patch (mutants) and the judge's style probe (probes)."""
