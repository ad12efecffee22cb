# Shared by bench/load.sh, bench/size-study.sh and bench/soak.sh: build,
# certificates, the load generator, and starting, probing and stopping one
# pinned server at a time on loopback. Source it; it defines functions only
# (plus defaults that callers may override through the environment).
#
# Every wait here is bounded: readiness polls give up after READY_TIMEOUT_S,
# stops escalate to SIGKILL after 5 s, and oha runs for a fixed duration.

ROOT=${ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
WORK=${WORK:-$CARGO_TARGET_DIR/bench}
SERVER_CPU=${SERVER_CPU:-0}
LOAD_CPU=${LOAD_CPU:-1}
# Loopback only: these scripts must never send traffic anywhere else.
HOST=127.0.0.1
PORT=${PORT:-18443}
READY_TIMEOUT_S=${READY_TIMEOUT_S:-180}
FIXTURES=${FIXTURES:-$ROOT/tests/fixtures/admission-reviews}
MUTATE_BODY=${MUTATE_BODY:-$FIXTURES/pod-node-exporter-node-a-1-create.mutate.json}
VALIDATE_BODY=${VALIDATE_BODY:-$FIXTURES/pod-node-exporter-node-a-1-create.validate.json}
CLK_TCK=$(getconf CLK_TCK)

log() { echo "[$(date +%H:%M:%S)] $*" >&2; }
die() { log "error: $*"; exit 1; }

# The load generator: oha from crates.io by default (HTTP/1.1 and HTTP/2
# over rustls, a fixed-rate mode with latency correction); h2load from
# Debian's nghttp2-client when oha is not installed or LOADGEN=h2load
# (HTTP/1.1 with --h1 and HTTP/2, --rps per connection, percentiles from
# its per-request log; it does not correct for coordinated omission).
# wrk from Debian has no fixed-rate mode and no HTTP/2, so it is not used.
ensure_loadgen() {
    OHA=${OHA:-$(command -v oha || true)}
    if [[ -z $OHA && -x $HOME/.cargo/bin/oha ]]; then OHA=$HOME/.cargo/bin/oha; fi
    if [[ -z ${LOADGEN:-} ]]; then
        if [[ -n $OHA ]]; then LOADGEN=oha; elif command -v h2load >/dev/null; then LOADGEN=h2load; else LOADGEN=oha; fi
    fi
    case $LOADGEN in
        oha)
            if [[ -z $OHA ]]; then
                log "installing oha (cargo install oha --locked)"
                cargo info oha >/dev/null || die "oha is not available from crates.io"
                cargo install oha --locked || die "oha failed to build; apt-get install -y nghttp2-client and rerun with LOADGEN=h2load"
                OHA=$HOME/.cargo/bin/oha
            fi
            LOADGEN_VERSION=$("$OHA" --version | head -1) ;;
        h2load)
            command -v h2load >/dev/null || apt-get install -y nghttp2-client >&2 || die "cannot install h2load (nghttp2-client)"
            LOADGEN_VERSION=$(h2load --version | head -1) ;;
        *) die "LOADGEN must be oha or h2load" ;;
    esac
    log "load generator: $LOADGEN_VERSION"
}

# build_variant ALLOC: release build of the binary and the examples, copied
# to $WORK/bin/ALLOC so both allocators can be driven in one run.
build_variant() {
    local alloc=$1 features=()
    [[ $alloc == mimalloc ]] && features=(--features mimalloc)
    log "building release ($alloc)"
    (cd "$ROOT" && cargo build --release --examples --bins "${features[@]}") >&2
    mkdir -p "$WORK/bin/$alloc"
    cp "$CARGO_TARGET_DIR/release/nodescope" "$WORK/bin/$alloc/"
    for example in naive_floor transport_floor gen_store; do
        cp "$CARGO_TARGET_DIR/release/examples/$example" "$WORK/bin/$alloc/"
    done
}

make_certs() {
    local bin=$1
    rm -rf "$WORK/certs"
    "$bin" certs --host localhost --host 127.0.0.1 --out "$WORK/certs" >/dev/null
    CA=$WORK/certs/ca.crt
    CERT=$WORK/certs/tls.crt
    KEY=$WORK/certs/tls.key
    [[ -s $CA && -s $CERT && -s $KEY ]] || die "nodescope certs did not write ca.crt, tls.crt, tls.key"
}

port_free() {
    ! curl -s -o /dev/null --max-time 1 --cacert "$CA" "https://$HOST:$PORT/healthz"
}

# start_server LOGFILE CMD...: starts CMD pinned to SERVER_CPU, waits for
# /readyz 200 and sets SERVER_PID and READY_MS (from just before the fork).
start_server() {
    local logfile=$1; shift
    port_free || die "something already answers on $HOST:$PORT; set PORT"
    local t0 t1 deadline
    t0=$(date +%s%N)
    taskset -c "$SERVER_CPU" "$@" >"$logfile" 2>&1 &
    SERVER_PID=$!
    deadline=$((t0 + READY_TIMEOUT_S * 1000000000))
    while :; do
        if curl -s -o /dev/null -w '%{http_code}' --max-time 1 --cacert "$CA" \
            "https://$HOST:$PORT/readyz" 2>/dev/null | grep -q '^200$'; then
            break
        fi
        kill -0 "$SERVER_PID" 2>/dev/null || { cat "$logfile" >&2; die "server exited before it was ready: $*"; }
        (($(date +%s%N) < deadline)) || { stop_server; die "not ready within ${READY_TIMEOUT_S}s: $*"; }
        sleep 0.01
    done
    t1=$(date +%s%N)
    READY_MS=$(((t1 - t0) / 1000000))
}

stop_server() {
    [[ -n ${SERVER_PID:-} ]] || return 0
    kill -TERM "$SERVER_PID" 2>/dev/null || true
    for _ in $(seq 50); do
        kill -0 "$SERVER_PID" 2>/dev/null || break
        sleep 0.1
    done
    kill -KILL "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
    SERVER_PID=
}

# status_mib FIELD: VmRSS or VmHWM of the server, in MiB.
status_mib() {
    awk -v f="$1:" '$1 == f { printf "%.2f", $2 / 1024 }' "/proc/$SERVER_PID/status"
}

# cpu_ticks: utime + stime of the server (all threads), in clock ticks.
cpu_ticks() {
    # Fields after the ")" closing comm: state is 1, utime 12, stime 13.
    sed 's/.*) //' "/proc/$SERVER_PID/stat" | awk '{ print $12 + $13 }'
}

# loadgen_args TEST: arguments for one named test of the current LOADGEN.
#   c16, c64   max throughput, HTTP/1.1 keep-alive, 16 or 64 connections
#   h2         max throughput, HTTP/2, H2_CONNS connections x H2_STREAMS streams
#   rN         fixed rate of N req/s over HTTP/1.1 keep-alive (RATE_CONNS connections)
loadgen_args() {
    local test=$1 conns=${RATE_CONNS:-10}
    case $LOADGEN:$test in
        oha:c16) echo "-c 16" ;;
        oha:c64) echo "-c 64" ;;
        oha:h2) echo "--http2 -c ${H2_CONNS:-4} -p ${H2_STREAMS:-16}" ;;
        oha:r*) echo "-c $conns -q ${test#r} --latency-correction" ;;
        h2load:c16) echo "--h1 -c 16" ;;
        h2load:c64) echo "--h1 -c 64" ;;
        h2load:h2) echo "-c ${H2_CONNS:-4} -m ${H2_STREAMS:-16}" ;;
        h2load:r*) echo "--h1 -c $conns --rps $((${test#r} / conns))" ;;
        *) die "unknown test $test" ;;
    esac
}

# start_load OUT URL BODY TEST: starts one fixed-duration (DURATION s) run
# of the load generator pinned to LOAD_CPU in the background; sets LOAD_PID.
start_load() {
    local out=$1 url=$2 body=$3 test=$4 args
    read -ra args <<<"$(loadgen_args "$test")"
    case $LOADGEN in
        oha)
            # -w: requests in flight when the duration ends are finished, not
            # counted as "aborted due to deadline" errors (oha's default on
            # HTTP/1.1, which the 2026-11-22 05:51 soak reported as 2 errors).
            taskset -c "$LOAD_CPU" "$OHA" --no-tui --output-format json -z "${DURATION}s" -w \
                -m POST -H 'Content-Type: application/json' -D "$body" \
                --cacert "$CA" "${args[@]}" "$url" >"$out" 2>"$out.err" & ;;
        h2load)
            # h2load appends to its log; percentiles must cover this run only.
            rm -f "$out.log"
            # h2load does not verify the server certificate; loopback only.
            taskset -c "$LOAD_CPU" h2load -D "$DURATION" -t 1 -d "$body" \
                -H 'Content-Type: application/json' --log-file "$out.log" \
                "${args[@]}" "$url" >"$out" 2>"$out.err" & ;;
    esac
    LOAD_PID=$!
}

# finish_load OUT: waits for the run and sets RPS P50 P99 P999 (ms) OK ERRORS.
finish_load() {
    local out=$1
    wait "$LOAD_PID" || { cat "$out.err" >&2; die "$LOADGEN failed"; }
    LOAD_PID=
    read -r RPS P50 P99 P999 OK ERRORS < <(python3 "$ROOT/bench/report.py" "$LOADGEN" "$out" "$DURATION")
}

# run_load OUT URL BODY TEST: start_load + finish_load, and the server's
# CPU over the run: CPU_US per 200 answer and CPU_PCT of one core.
run_load() {
    local before after t0 t1
    before=$(cpu_ticks)
    t0=$(date +%s%N)
    start_load "$@"
    finish_load "$1"
    t1=$(date +%s%N)
    after=$(cpu_ticks)
    CPU_US=$(python3 -c "print(f'{($after - $before) * 1e6 / $CLK_TCK / max($OK, 1):.2f}')")
    CPU_PCT=$(python3 -c "print(f'{($after - $before) * 100 / $CLK_TCK / (($t1 - $t0) / 1e9):.1f}')")
}

machine_summary() {
    echo "- machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo)"
    echo "- load average at start: $(cut -d' ' -f1-3 /proc/loadavg) (other work shares these cores)"
    echo "- kernel: $(uname -r); rustc: $(rustc --version); load generator: $LOADGEN_VERSION"
    echo "- server pinned to CPU $SERVER_CPU, load generator to CPU $LOAD_CPU (taskset); loopback only"
}
