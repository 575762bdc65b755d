"""Demo and test data: the sample repository the demo mines and the tests validate."""
