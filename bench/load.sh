#!/usr/bin/env bash
# Load benchmark of nodescope over real TLS on loopback, against two floor
# servers measured in the same run on the same stack (issue 7):
#   naive_floor      parses the whole review into serde_json::Value, allows
#   transport_floor  reads only the uid, allows
#   nodescope        `serve` with 100 node-scoped VPAs x 5,000 nodes x 2
#                    containers and the whole policies/ bundle
# Each server is pinned to CPU $SERVER_CPU and the load generator (oha, or
# h2load: see bench/lib.sh) to CPU $LOAD_CPU. For
# /mutate and /validate: max throughput at 16 and 64 HTTP/1.1 keep-alive
# connections and over HTTP/2; p50/p99/p99.9 at fixed rates of 1,000 and
# 5,000 req/s; RSS idle, with the store and under load; start to /readyz;
# server CPU per request. Every figure is the median of $RUNS runs with
# min and max; the targets are judged on ratios taken within each run.
#
# Usage: bench/load.sh            (about 13 minutes with the defaults)
# Environment: DURATION=5 (s per oha run) RUNS=3 ALLOCATORS="system mimalloc"
#   TESTS="c16 c64 h2 r1000 r5000" VPAS=100 NODES=5000 PORT=18443 SERVER_CPU=0 LOAD_CPU=1 SKIP_BUILD=1
#   WORK=target/bench LOADGEN=oha|h2load OHA=/path/to/oha RATE_CONNS=10
# Output: a markdown report on stdout and in bench/results/<date>.md; raw
# rows in $WORK/load-<date>.tsv.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"

DURATION=${DURATION:-5}
RUNS=${RUNS:-3}
ALLOCATORS=${ALLOCATORS:-"system mimalloc"}
VPAS=${VPAS:-100}
NODES=${NODES:-5000}
H2_CONNS=${H2_CONNS:-4}
H2_STREAMS=${H2_STREAMS:-16}
SKIP_BUILD=${SKIP_BUILD:-0}
# A subset of "c16 c64 h2 r1000 r5000" to run only those tests.
TESTS=${TESTS:-"c16 c64 h2 r1000 r5000"}

trap stop_server EXIT
for body in "$MUTATE_BODY" "$VALIDATE_BODY"; do
    [[ -s $body ]] || die "captured review not found: $body (set FIXTURES)"
done
ensure_loadgen
mkdir -p "$WORK" "$ROOT/bench/results"
if [[ $SKIP_BUILD != 1 ]]; then
    for alloc in $ALLOCATORS; do build_variant "$alloc"; done
fi
first=$(echo "$ALLOCATORS" | awk '{ print $1 }')
make_certs "$WORK/bin/$first/nodescope"
STORE=$WORK/store-$VPAS-vpas-$NODES-nodes.json
"$WORK/bin/$first/gen_store" --vpas "$VPAS" --nodes "$NODES" --out "$STORE"

STAMP=$(date +%Y-%m-%d-%H%M%S)
RAW=$WORK/load-$STAMP.tsv
: >"$RAW"
HEADER=$(
    echo "# nodescope load benchmark, $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo
    echo "Command: \`DURATION=$DURATION RUNS=$RUNS ALLOCATORS=\"$ALLOCATORS\" TESTS=\"$TESTS\" LOADGEN=$LOADGEN bench/load.sh\` at $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
    echo
    machine_summary
    echo "- store: $VPAS node-scoped VPAs x $NODES nodes x 2 containers ($(du -m "$STORE" | cut -f1) MiB of JSON), policies: $(find "$ROOT/policies" -name '*.yaml' | wc -l) files"
    echo "- reviews: $(basename "$MUTATE_BODY") ($(wc -c <"$MUTATE_BODY") B), $(basename "$VALIDATE_BODY") ($(wc -c <"$VALIDATE_BODY") B)"
    echo "- each load run: ${DURATION} s; HTTP/2: $H2_CONNS connections x $H2_STREAMS streams; fixed rates over ${RATE_CONNS:-10} HTTP/1.1 connections"
)

record() { printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$run" "$alloc" "$server" "$1" "$2" "$3" "$4" >>"$RAW"; }

server_cmd() {
    local bin=$WORK/bin/$alloc
    case $1 in
        naive_floor | transport_floor)
            echo "$bin/$1 --listen $HOST:$PORT --tls-cert $CERT --tls-key $KEY" ;;
        nodescope)
            echo "$bin/nodescope serve --listen $HOST:$PORT --tls-cert $CERT --tls-key $KEY --store file:$2 --policies $ROOT/policies --log-level warn --drain-timeout 1" ;;
    esac
}

# The numbers mean nothing unless each server really answers the review.
check_answer() {
    local endpoint=$1 body=$2 expect=$3 got
    got=$(curl -s --max-time 5 --cacert "$CA" -H 'Content-Type: application/json' \
        --data-binary "@$body" "https://$HOST:$PORT/$endpoint")
    grep -q "$expect" <<<"$got" || die "$server /$endpoint did not answer with $expect: ${got:0:300}"
}

tests_for() {
    local server=$1 endpoint=$2 all=(c16 c64 h2 r1000 r5000) test
    if [[ $server != nodescope && $endpoint == validate ]]; then
        # The floors' handler ignores the path; only the body differs.
        all=(c16 c64)
    fi
    for test in "${all[@]}"; do
        [[ " $TESTS " == *" $test "* ]] && echo "$test"
    done
}

started=$(date +%s)
for run in $(seq "$RUNS"); do
    for alloc in $ALLOCATORS; do
        # nodescope idle: the small example store, no traffic.
        server=nodescope
        # shellcheck disable=SC2046
        start_server "$WORK/server.log" $(server_cmd nodescope "$ROOT/examples/store")
        record - idle rss_mib "$(status_mib VmRSS)"
        stop_server
        for server in naive_floor transport_floor nodescope; do
            log "run $run/$RUNS, $alloc, $server"
            # shellcheck disable=SC2046
            start_server "$WORK/server.log" $(server_cmd "$server" "$STORE")
            record - start ready_ms "$READY_MS"
            if [[ $server == nodescope ]]; then
                record - start rss_mib "$(status_mib VmRSS)"
                check_answer mutate "$MUTATE_BODY" '"patch"'
                check_answer validate "$VALIDATE_BODY" '"allowed":true'
            else
                record - idle rss_mib "$(status_mib VmRSS)"
                check_answer mutate "$MUTATE_BODY" '"allowed":true'
            fi
            max_rss=0
            for endpoint in mutate validate; do
                body=$MUTATE_BODY
                [[ $endpoint == validate ]] && body=$VALIDATE_BODY
                for test in $(tests_for "$server" "$endpoint"); do
                    run_load "$WORK/load.out" "https://$HOST:$PORT/$endpoint" "$body" "$test"
                    record "$endpoint" "$test" rps "$RPS"
                    record "$endpoint" "$test" p50 "$P50"
                    record "$endpoint" "$test" p99 "$P99"
                    record "$endpoint" "$test" p999 "$P999"
                    record "$endpoint" "$test" errors "$ERRORS"
                    record "$endpoint" "$test" cpu_us_per_req "$CPU_US"
                    record "$endpoint" "$test" cpu_pct "$CPU_PCT"
                    rss=$(status_mib VmRSS)
                    max_rss=$(python3 -c "print(max($max_rss, $rss))")
                    log "  /$endpoint $test: $RPS req/s, p50 $P50 ms, p99 $P99 ms, $CPU_US us CPU/req, CPU $CPU_PCT %, errors $ERRORS, RSS $rss MiB"
                done
            done
            record - load rss_mib "$max_rss"
            record - load hwm_mib "$(status_mib VmHWM)"
            stop_server
        done
    done
done
elapsed=$(($(date +%s) - started))

OUT=$ROOT/bench/results/$STAMP.md
{
    echo "$HEADER"
    echo "- measuring took ${elapsed} s; load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo
    python3 "$ROOT/bench/report.py" load "$RAW"
} | tee "$OUT"
log "report written to $OUT (raw rows: $RAW)"
