#!/usr/bin/env bash
# The test command from README.md: the whole test suite, then the policy
# bundle's own suites through the CLI (once `nodescope test` exists).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --locked
