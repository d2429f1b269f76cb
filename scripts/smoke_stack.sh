#!/usr/bin/env bash
# Is the production stack up? Run after
#   docker compose -f infra/deploy/docker-compose.yml up -d --build
# once vLLM has loaded its model (`docker compose ... ps` shows it healthy).
#
#   scripts/smoke_stack.sh [ADAPTER]
#
# Checks MLflow, Prefect's server, a worker online on the work pool and the nightly
# deployment registered, vLLM serving the base model, then one chat completion. ADAPTER,
# if given, is a folder on the shared adapter volume (`flywheel promote` puts each
# version's there as <model>-v<version>): it is loaded into vLLM unless it already is,
# and the chat completion goes to it instead of the base model.
#
# Each check prints "ok" or "FAILED" with the reason; the exit status is 1 if any failed.
# Only curl is needed. Where the services are (defaults: this box's published ports):
#   MLFLOW_URL (http://localhost:5000)    PREFECT_API_URL (http://localhost:4200/api)
#   VLLM_URL (http://localhost:8000)      VLLM_API_KEY (unset: none)
#   MODEL (smollm2-135m-instruct)         POOL (flywheel)
#   ADAPTER_DIR (/adapters: the volume as vLLM sees it)
#   DEPLOYMENT (nightly-scheduled/nightly: flow/deployment)
#   SMOKE_TIMEOUT (30 seconds per request)
set -euo pipefail

MLFLOW_URL=${MLFLOW_URL:-http://localhost:5000}
PREFECT_API_URL=${PREFECT_API_URL:-http://localhost:4200/api}
VLLM_URL=${VLLM_URL:-http://localhost:8000}
VLLM_API_KEY=${VLLM_API_KEY:-}
MODEL=${MODEL:-smollm2-135m-instruct}
POOL=${POOL:-flywheel}
ADAPTER_DIR=${ADAPTER_DIR:-/adapters}
DEPLOYMENT=${DEPLOYMENT:-nightly-scheduled/nightly}
SMOKE_TIMEOUT=${SMOKE_TIMEOUT:-30}
ADAPTER=${1:-}

failures=0
BODY=""

ok() { printf 'ok      %s\n' "$1"; }
failed() {
  printf 'FAILED  %s: %s\n' "$1" "$2"
  failures=$((failures + 1))
}

# request METHOD URL [JSON]: the response body in BODY; fails (with the reason in BODY)
# on no connection or an HTTP status of 400 or more.
request() {
  local method=$1 url=$2 data=${3:-} out code
  local args=(--silent --show-error --max-time "$SMOKE_TIMEOUT" --request "$method"
    --write-out '\n%{http_code}')
  if [[ -n $data ]]; then
    args+=(--header 'Content-Type: application/json' --data "$data")
  fi
  if [[ -n $VLLM_API_KEY && $url == "$VLLM_URL"* ]]; then
    args+=(--header "Authorization: Bearer $VLLM_API_KEY")
  fi
  if ! out=$(curl "${args[@]}" "$url" 2>&1); then
    out=${out%$'\n'*}  # the status line curl writes even then (000)
    BODY="no answer from $url (${out//$'\n'/ })"
    return 1
  fi
  code=${out##*$'\n'}
  BODY=${out%$'\n'*}
  if [[ ! $code =~ ^[0-9]+$ ]] || ((code >= 400)); then
    BODY="HTTP $code from $url: ${BODY:0:300}"
    return 1
  fi
}

# MLflow: the tracking server answers (its database is reachable, or it would not start)
if request GET "$MLFLOW_URL/health"; then
  ok "MLflow $MLFLOW_URL/health"
else
  failed "MLflow" "$BODY"
fi

# Prefect: the server, a worker polling the pool, the nightly deployment on it
if request GET "$PREFECT_API_URL/health"; then
  ok "Prefect server $PREFECT_API_URL/health"
else
  failed "Prefect server" "$BODY"
fi
if request POST "$PREFECT_API_URL/work_pools/$POOL/workers/filter" '{}'; then
  if grep -Eq '"status": ?"ONLINE"' <<<"$BODY"; then
    ok "Prefect worker online in pool '$POOL'"
  else
    failed "Prefect worker" "no worker online in pool '$POOL' (docker compose logs flywheel-worker)"
  fi
else
  failed "Prefect worker" "$BODY"
fi
if request GET "$PREFECT_API_URL/deployments/name/$DEPLOYMENT"; then
  ok "Prefect deployment $DEPLOYMENT"
else
  failed "Prefect deployment" "$BODY"
fi

# vLLM: the base model is served
models=""
if request GET "$VLLM_URL/v1/models"; then
  models=$BODY
  if grep -Eq "\"id\": ?\"$MODEL\"" <<<"$models"; then
    ok "vLLM serves $MODEL"
  else
    failed "vLLM models" "$MODEL is not among ${models:0:300}"
  fi
else
  failed "vLLM models" "$BODY"
fi

# optional: an adapter from the shared volume, loaded at run time
target=$MODEL
if [[ -n $ADAPTER ]]; then
  if [[ ! $ADAPTER =~ ^[A-Za-z0-9._-]+$ ]]; then
    failed "vLLM adapter" "'$ADAPTER' is not a plain folder name"
  elif grep -Eq "\"id\": ?\"$ADAPTER\"" <<<"$models"; then
    ok "vLLM adapter $ADAPTER already loaded"
    target=$ADAPTER
  elif request POST "$VLLM_URL/v1/load_lora_adapter" \
    "{\"lora_name\": \"$ADAPTER\", \"lora_path\": \"$ADAPTER_DIR/$ADAPTER\"}"; then
    ok "vLLM loaded adapter $ADAPTER from $ADAPTER_DIR/$ADAPTER"
    target=$ADAPTER
  else
    failed "vLLM adapter" "$BODY"
  fi
fi

# one chat completion, on the adapter if one was loaded
chat="{\"model\": \"$target\", \"max_tokens\": 8, \"temperature\": 0,
  \"messages\": [{\"role\": \"user\", \"content\": \"Say hello.\"}]}"
if request POST "$VLLM_URL/v1/chat/completions" "$chat"; then
  if grep -q '"choices"' <<<"$BODY"; then
    ok "vLLM chat completion on $target"
  else
    failed "vLLM chat completion" "no choices in ${BODY:0:300}"
  fi
else
  failed "vLLM chat completion" "$BODY"
fi

if ((failures)); then
  echo "$failures check(s) failed"
  exit 1
fi
echo "the stack is up"
