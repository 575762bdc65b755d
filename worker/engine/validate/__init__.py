"""A commit's oracle (Fail-to-Pass, Pass-to-Pass, flaky) and verdict, and generated tests."""
