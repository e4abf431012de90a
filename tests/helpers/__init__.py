"""Test helpers (not test modules): running the CLI and fresh interpreters, and shared test servers/towers."""
