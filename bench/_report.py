"""How every bench prints a figure: its value beside a baseline measured in the same run, and their ratio."""


def report(name: str, value: float, unit: str, baseline: float, baseline_unit: str = "") -> None:
    ratio = value / baseline if baseline else float("inf")
    print(f"{name}: {value:.3f} {unit} (baseline: {baseline:.3f} {baseline_unit or unit}, ratio: {ratio:.2f})",
          flush=True)
