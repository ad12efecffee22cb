#!/usr/bin/env bash
# Mirror the policy bundle (policies/*.yaml) into the kustomize base, which may
# only read files under its own directory. Run after changing policies/;
# tests/manifests.rs fails while the two differ. kustomization.yaml is ours.
set -euo pipefail
cd "$(dirname "$0")/.."
dest=manifests/base/policies
find "$dest" -maxdepth 1 -name '*.yaml' ! -name kustomization.yaml -delete
find policies -maxdepth 1 -name '*.yaml' ! -name kustomization.yaml -exec cp {} "$dest"/ \;
echo "synced $(ls policies/*.yaml | wc -l) files into $dest; list new files in manifests/base/kustomization.yaml (configMapGenerator) and, for policies, $dest/kustomization.yaml"
