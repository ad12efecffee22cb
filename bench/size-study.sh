#!/usr/bin/env bash
# Size study (issue 7): one node-scoped VPA (the node-exporter DaemonSet of
# the captured review) with 500, 5,000 and 50,000 nodes. For each size:
# RSS after loading, start to /readyz, /mutate throughput at 16 HTTP/1.1
# connections with server CPU per request, and p50/p99 at 1,000 req/s.
# Per-request cost should not grow with nodes: a lookup is by node name.
#
# Usage: bench/size-study.sh       (about 3 minutes with the defaults)
# Environment: DURATION=5 RUNS=3 SIZES="500 5000 50000" ALLOC=system
#   PORT SERVER_CPU LOAD_CPU WORK LOADGEN OHA, and SKIP_BUILD=1 to reuse the
#   binaries bench/load.sh built in $WORK/bin/$ALLOC.
# Output: markdown on stdout and in bench/results/<date>-size.md.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"

DURATION=${DURATION:-5}
RUNS=${RUNS:-3}
SIZES=${SIZES:-"500 5000 50000"}
ALLOC=${ALLOC:-system}
SKIP_BUILD=${SKIP_BUILD:-0}

trap stop_server EXIT
[[ -s $MUTATE_BODY ]] || die "captured review not found: $MUTATE_BODY (set FIXTURES)"
ensure_loadgen
mkdir -p "$WORK" "$ROOT/bench/results"
[[ $SKIP_BUILD == 1 ]] || build_variant "$ALLOC"
BIN=$WORK/bin/$ALLOC
make_certs "$BIN/nodescope"

STAMP=$(date +%Y-%m-%d-%H%M%S)
RAW=$WORK/size-$STAMP.tsv
: >"$RAW"
alloc=$ALLOC
server=nodescope
record() { printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$run" "$alloc" "$server" "$1" "$2" "$3" "$4" >>"$RAW"; }

for nodes in $SIZES; do
    "$BIN/gen_store" --vpas 1 --nodes "$nodes" --out "$WORK/store-1-vpa-$nodes-nodes.json"
done
header=$(
    echo "# nodescope size study, $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo
    echo "Command: \`DURATION=$DURATION RUNS=$RUNS SIZES=\"$SIZES\" ALLOC=$ALLOC bench/size-study.sh\` at $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
    echo
    machine_summary
)
url=https://$HOST:$PORT/mutate
for run in $(seq "$RUNS"); do
    for nodes in $SIZES; do
        store=$WORK/store-1-vpa-$nodes-nodes.json
        log "run $run/$RUNS, $nodes nodes"
        record "$nodes" store file_mib "$(python3 -c "import os; print(os.path.getsize('$store') / 1048576)")"
        start_server "$WORK/server.log" "$BIN/nodescope" serve --listen "$HOST:$PORT" \
            --tls-cert "$CERT" --tls-key "$KEY" --store "file:$store" \
            --policies "$ROOT/policies" --log-level warn --drain-timeout 1
        record "$nodes" start ready_ms "$READY_MS"
        record "$nodes" start rss_mib "$(status_mib VmRSS)"
        got=$(curl -s --max-time 5 --cacert "$CA" -H 'Content-Type: application/json' \
            --data-binary "@$MUTATE_BODY" "$url")
        grep -q '"patch"' <<<"$got" || die "no patch at $nodes nodes: ${got:0:300}"
        run_load "$WORK/load.out" "$url" "$MUTATE_BODY" c16
        record "$nodes" c16 rps "$RPS"
        record "$nodes" c16 cpu_us_per_req "$CPU_US"
        log "  c16: $RPS req/s, $CPU_US us CPU/req, errors $ERRORS"
        run_load "$WORK/load.out" "$url" "$MUTATE_BODY" r1000
        record "$nodes" r1000 p50 "$P50"
        record "$nodes" r1000 p99 "$P99"
        log "  r1000: p50 $P50 ms, p99 $P99 ms, errors $ERRORS"
        stop_server
    done
done

OUT=$ROOT/bench/results/$STAMP-size.md
{
    echo "$header"
    echo
    python3 "$ROOT/bench/report.py" size "$RAW"
} | tee "$OUT"
log "report written to $OUT (raw rows: $RAW)"
