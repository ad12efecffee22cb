#!/usr/bin/env bash
# Self-signed install, step 1: make a CA and serving pair with `nodescope certs`
# (unless certs/ already holds one, or with --renew) and put the CA into the
# self-signed overlay's caBundle patch. Step 2 is yours:
#   kubectl apply -k manifests/overlays/self-signed
# The filled cabundle-patch.yaml holds only the public CA certificate; to get
# the placeholder back: git checkout manifests/overlays/self-signed/cabundle-patch.yaml
set -euo pipefail
cd "$(dirname "$0")/.."
overlay=manifests/overlays/self-signed
certs=$overlay/certs
if [[ "${1:-}" == "--renew" || ! -f $certs/tls.key ]]; then
  args=(certs --host nodescope.nodescope-system.svc --out "$certs")
  # `nodescope certs` never replaces an existing CA or key on its own.
  [[ "${1:-}" == "--renew" ]] && args+=(--force)
  if command -v nodescope >/dev/null 2>&1; then
    nodescope "${args[@]}"
  else
    cargo run --quiet --locked -- "${args[@]}"
  fi
fi
bundle=$(base64 -w0 <"$certs/ca.crt")
# Replaces the placeholder, or the bundle of an earlier run.
sed -i -E "s|^([[:space:]]*caBundle:).*|\1 ${bundle}|" "$overlay/cabundle-patch.yaml"
echo "caBundle set in $overlay/cabundle-patch.yaml; now: kubectl apply -k $overlay"
