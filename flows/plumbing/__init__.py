"""Prefect plumbing: the deployment's entry, the API server a night starts on this
machine, the one-night-per-state-folder lock, and the process settings outside
libraries read at import."""
