"""The history walk, the commit filters, and the check that a commit changes Python beyond comments."""
