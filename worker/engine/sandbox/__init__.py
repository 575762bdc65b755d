"""Where untrusted code runs: the Sandbox protocol (base), bubblewrap (local) and containers (docker)."""
