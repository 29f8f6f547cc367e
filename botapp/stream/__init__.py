"""The streaming process: stored files over HTTP from their own origin (docs/operating.md)."""
