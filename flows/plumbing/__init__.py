"""Prefect plumbing: the deployment's entry, the door every command that changes a state
folder comes in by (its lock, a private folder, the process settings outside libraries
read at import), and the API server a night starts on this machine."""
