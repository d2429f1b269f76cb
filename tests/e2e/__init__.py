"""End-to-end tests: whole nights on real models, a real MLflow and a real Prefect."""
