# MLflow's tracking server with the PostgreSQL driver its backend store URI needs
# (postgresql://, docker-compose.yml): the official image ships without one, and
# installing it at every start would reach PyPI on every restart.
# The MLflow release is the one constraints.txt pins for flywheel's client.
FROM ghcr.io/mlflow/mlflow:v3.17.2
RUN pip install --no-cache-dir psycopg2-binary==2.9.13
