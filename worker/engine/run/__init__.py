"""One pytest run in a sandbox, and the report plugin that tells each test's outcome."""
