"""Prefect flows that compose flywheel's stages, and the command line."""
