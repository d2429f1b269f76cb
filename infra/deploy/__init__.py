"""Deployment files for users' machines: compose stack and Prefect deployment."""
