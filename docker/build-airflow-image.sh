#!/usr/bin/env bash
# Build the Airflow image with dlbench (the root Dockerfile; docs/install.md) from an assembled
# context: the root's Dockerfile, requirement files, packages.txt, pyproject.toml and include/; the
# wheelhouse of requirements.txt (make airflow-wheelhouse) is served to the build, not copied
# (include/dlbench/execution/docker_build.py, which also removes what the build replaced).
# `make airflow-image` runs it under the lock build/airflow-image.lock (a second build, e.g. a
# test's beside CI's, waits for the first).
#
#   PYTHON=.venv/bin/python docker/build-airflow-image.sh TAG OFFICIAL_BASE LOCAL_BASE
set -euo pipefail
tag=$1 official=$2 local_base=$3
repo=$(cd "$(dirname "$0")/.." && pwd)
context=$repo/build/airflow-context
python=${PYTHON:-$repo/.venv/bin/python}
rm -rf "$context"; mkdir -p "$context"
cp -a "$repo"/{Dockerfile,requirements.txt,constraints.txt,pyproject.toml,packages.txt,include} "$context/"
find "$context/include" -name __pycache__ -prune -exec rm -rf {} +
printf '**/__pycache__\n' > "$context/.dockerignore"
# FROM the official Airflow image when the engine has it, else the project's local Debian base.
base=$local_base
docker image inspect "$official" >/dev/null 2>&1 && base=$official
start=$(date +%s)
"$python" -m dlbench.execution.docker_build --wheelhouse "$repo/build/airflow-wheelhouse" -- \
  -q --build-arg BASE_IMAGE="$base" -t "$tag" "$context" >/dev/null
echo "built $tag from $base in $(( $(date +%s) - start )) s" \
     "($(( $(docker image inspect --format '{{.Size}}' "$tag") / 1048576 )) MiB)"
