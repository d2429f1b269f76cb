"""What a night did and what is in production, for people and scripts: the night's
report as data, its rendering (summary, Prefect artifact, MLflow), its pictures, the
progress lines while it runs, and `flywheel status`."""
