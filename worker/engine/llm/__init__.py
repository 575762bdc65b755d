"""Language models: the clients of every backend, versioned prompts, and the issue writer."""
