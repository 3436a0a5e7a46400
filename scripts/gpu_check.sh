#!/usr/bin/env bash
# The GPU check where nothing of hfsdk is installed: the carried wheels go into a temp dir,
# the tree runs from PYTHONPATH (root + every plugin), under a time limit.
#   scripts/gpu_check.sh --device cuda --out "$OUT"        (args go to scripts/gpu_check.py)
# env: GPU_WHEELS (wheel folder; default .gpu_wheels), PYTHON (python3), GPU_CHECK_TIMEOUT_S (530)
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
py=${PYTHON:-python3}
site=$(mktemp -d "${TMPDIR:-/tmp}/gpu_check_site.XXXXXX")
trap 'rm -rf "$site"' EXIT
"$py" "$repo/scripts/gpu_wheels.py" install "${GPU_WHEELS:-$repo/.gpu_wheels}" "$site"
path="$site:$repo"
for plugin in "$repo"/plugins/*/; do path="$path:${plugin%/}"; done
PYTHONPATH="$path" timeout "${GPU_CHECK_TIMEOUT_S:-530}" "$py" "$repo/scripts/gpu_check.py" "$@"
