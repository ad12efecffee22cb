#!/usr/bin/env bash
# The test command from README.md: the whole test suite, then the policy
# bundle's own suites through the CLI.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --locked
cargo run --quiet --locked -- test policies/tests
