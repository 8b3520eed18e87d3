#!/usr/bin/env bash
# Builds the env-host image (deploy/Dockerfile) and checks it as Kubernetes would run it:
# read-only root file system, a writable volume only for the guest cache, no capabilities,
# the image's own HEALTHCHECK reaching "healthy", a non-root numeric user, and OpenEnv's own
# Python client (tests/openenv_client.py) playing the SQL env (the image's default command)
# and the support env (the args given) through the container's published port.
# Needs a running Docker daemon and OpenEnv's client in a Python: SANDGYM_OPENENV_PYTHON, or
# the venv that `cargo test --test cli openenv` makes in the temp dir.
# Usage: scripts/image-check.sh [IMAGE_TAG]   (default sandgym-env:check)
set -euo pipefail
cd "$(dirname "$0")/.."
tag="${1:-sandgym-env:check}"
py="${SANDGYM_OPENENV_PYTHON:-${TMPDIR:-/tmp}/sandgym-openenv-venv/bin/python}"
if ! "$py" -c "import openenv.core.generic_client" 2>/dev/null; then
  echo "no OpenEnv client at $py: run \`cargo test --test cli openenv\` once (it makes that" >&2
  echo "venv), or point SANDGYM_OPENENV_PYTHON at a Python with openenv 0.10 installed" >&2
  exit 2
fi
docker info >/dev/null || { echo "no Docker daemon answers: start one (dockerd)" >&2; exit 2; }

echo "==> docker build -f deploy/Dockerfile -t $tag ."
start=$(date +%s)
docker build -f deploy/Dockerfile -t "$tag" .
echo "built in $(($(date +%s) - start)) s; image size: $(docker image inspect -f '{{.Size}}' "$tag") bytes"

containers=()
cleanup() { [ ${#containers[@]} -eq 0 ] || docker rm -f "${containers[@]}" >/dev/null; }
trap cleanup EXIT

# Runs the image as deploy/k8s/deployment.yaml does; prints the container id.
run() {
  docker run -d --read-only --cap-drop ALL --security-opt no-new-privileges \
    --tmpfs /home/sandgym/.cache:uid=10001,gid=10001 -p 127.0.0.1::8000 "$tag" "$@"
}

check() { # container id, client kind
  local id=$1 kind=$2 status=starting
  for _ in $(seq 60); do
    status=$(docker inspect -f '{{.State.Health.Status}}' "$id")
    [ "$status" = starting ] || break
    sleep 1
  done
  if [ "$status" != healthy ]; then
    docker logs "$id" >&2
    echo "HEALTHCHECK says $status" >&2
    exit 1
  fi
  local uid
  uid=$(docker exec "$id" id -u)
  [ "$uid" = 10001 ] || { echo "runs as uid $uid, not 10001" >&2; exit 1; }
  local port
  port=$(docker port "$id" 8000/tcp | head -n1 | sed 's/.*://')
  echo "==> OpenEnv's client against the container ($kind, port $port)"
  "$py" tests/openenv_client.py "http://127.0.0.1:$port" "$kind"
}

id=$(run); containers+=("$id")
check "$id" sql
id=$(run --env customer-service-v0 --max-sessions 64); containers+=("$id")
check "$id" support
echo "image check passed: $tag"
