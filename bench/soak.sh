#!/usr/bin/env bash
# Soak (issue 7; not run in CI): /mutate at a fixed 1,000 req/s for 30
# minutes against `nodescope serve` with the 100 VPA x 5,000 node store,
# over HTTP/1.1 keep-alive. Reports errors, latency, and RSS growth from
# the end of a warm-up to the end. Targets: zero errors, growth < 5%.
#
# Usage: bench/soak.sh
# Environment: SOAK_SECONDS=1800 RATE=1000 CONNS=10 SAMPLE_SECONDS=10
#   WARMUP_SECONDS (default: a tenth of the soak, at most 120) ALLOC=system
#   VPAS=100 NODES=5000 SKIP_BUILD=1 PORT SERVER_CPU LOAD_CPU WORK LOADGEN OHA
# Output: markdown on stdout and in bench/results/<date>-soak.md, with the
# RSS samples in $WORK/soak-<date>-rss.tsv.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"

SOAK_SECONDS=${SOAK_SECONDS:-1800}
RATE=${RATE:-1000}
CONNS=${CONNS:-10}
SAMPLE_SECONDS=${SAMPLE_SECONDS:-10}
WARMUP_SECONDS=${WARMUP_SECONDS:-$((SOAK_SECONDS / 10 < 120 ? SOAK_SECONDS / 10 : 120))}
ALLOC=${ALLOC:-system}
VPAS=${VPAS:-100}
NODES=${NODES:-5000}
SKIP_BUILD=${SKIP_BUILD:-0}

LOAD_PID=
cleanup() {
    if [[ -n $LOAD_PID ]]; then kill -TERM "$LOAD_PID" 2>/dev/null || true; fi
    stop_server
}
trap cleanup EXIT
[[ -s $MUTATE_BODY ]] || die "captured review not found: $MUTATE_BODY (set FIXTURES)"
ensure_loadgen
mkdir -p "$WORK" "$ROOT/bench/results"
[[ $SKIP_BUILD == 1 ]] || build_variant "$ALLOC"
BIN=$WORK/bin/$ALLOC
make_certs "$BIN/nodescope"
STORE=$WORK/store-$VPAS-vpas-$NODES-nodes.json
"$BIN/gen_store" --vpas "$VPAS" --nodes "$NODES" --out "$STORE"
STAMP=$(date +%Y-%m-%d-%H%M%S)
SAMPLES=$WORK/soak-$STAMP-rss.tsv
load_at_start=$(cut -d' ' -f1-3 /proc/loadavg)

start_server "$WORK/server.log" "$BIN/nodescope" serve --listen "$HOST:$PORT" \
    --tls-cert "$CERT" --tls-key "$KEY" --store "file:$STORE" \
    --policies "$ROOT/policies" --log-level warn --drain-timeout 1
url=https://$HOST:$PORT/mutate
rss_before=$(status_mib VmRSS)
cpu_before=$(cpu_ticks)
log "soak: $SOAK_SECONDS s at $RATE req/s on $url (server pid $SERVER_PID, RSS $rss_before MiB)"
DURATION=$SOAK_SECONDS RATE_CONNS=$CONNS start_load "$WORK/soak.out" "$url" "$MUTATE_BODY" "r$RATE"
printf 'seconds\trss_mib\n' >"$SAMPLES"
t0=$(date +%s)
# Bounded: one sample per SAMPLE_SECONDS, never more than the soak allows.
for _ in $(seq $((SOAK_SECONDS / SAMPLE_SECONDS + 30))); do
    kill -0 "$LOAD_PID" 2>/dev/null || break
    kill -0 "$SERVER_PID" 2>/dev/null || die "server died during the soak"
    printf '%s\t%s\n' $(($(date +%s) - t0)) "$(status_mib VmRSS)" >>"$SAMPLES"
    sleep "$SAMPLE_SECONDS"
done
DURATION=$SOAK_SECONDS finish_load "$WORK/soak.out"
rss_end=$(status_mib VmRSS)
hwm=$(status_mib VmHWM)
cpu_after=$(cpu_ticks)
printf '%s\t%s\n' $(($(date +%s) - t0)) "$rss_end" >>"$SAMPLES"
rps=$RPS p50=$P50 p99=$P99 p999=$P999 ok=$OK errors=$ERRORS
stop_server

OUT=$ROOT/bench/results/$STAMP-soak.md
python3 - "$SAMPLES" "$WARMUP_SECONDS" <<PY | tee "$OUT"
import csv, sys
rows = [(int(r["seconds"]), float(r["rss_mib"])) for r in csv.DictReader(open(sys.argv[1]), delimiter="\t")]
warm = int(sys.argv[2])
after = [m for s, m in rows if s >= warm] or [rows[-1][1]]
base, end, peak = after[0], rows[-1][1], max(m for _, m in rows)
growth = (end - base) / base * 100
cpu_us = ($cpu_after - $cpu_before) * 1e6 / $CLK_TCK / max($ok, 1)
short = "" if $SOAK_SECONDS >= 1800 else f" (a SHORTENED soak: {$SOAK_SECONDS} s instead of the 1,800 s of issue 7)"
print(f"# nodescope soak, $(date -u '+%Y-%m-%d %H:%M UTC'){short}\n")
print(f"Command: \`SOAK_SECONDS=$SOAK_SECONDS RATE=$RATE bench/soak.sh\` at $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)\n")
print("""$(machine_summary)""")
print(f"- load average when the soak started: $load_at_start, at the end: $(cut -d' ' -f1-3 /proc/loadavg)\n")
print("| figure | value | target | verdict |")
print("|---|---|---|---|")
print(f"| requests answered 200 | $ok ({$rps:.0f} req/s achieved of $RATE) | | |")
print(f"| errors (non-200 or transport) | $errors | 0 | {'**meets**' if $errors == 0 else '**misses**'} |")
if "$LOADGEN" == "oha":
    import json
    raw = json.load(open("$WORK/soak.out"))
    kinds = {**{f"HTTP {k}": v for k, v in (raw.get("statusCodeDistribution") or {}).items() if k != "200"},
             **(raw.get("errorDistribution") or {})}
    if kinds:
        print(f"| error kinds | {'; '.join(f'{k}: {v}' for k, v in kinds.items())} | | |")
print(f"| latency p50 / p99 / p99.9 | $p50 / $p99 / $p999 ms | | |")
print(f"| server CPU per request | {cpu_us:.1f} us | | |")
print(f"| RSS before traffic | $rss_before MiB | | |")
print(f"| RSS after {warm} s warm-up -> end | {base:.1f} -> {end:.1f} MiB | | |")
print(f"| RSS growth after warm-up | {growth:+.2f}% | < 5% | {'**meets**' if growth < 5 else '**misses**'} |")
print(f"| peak RSS (VmHWM) | $hwm MiB | | |")
print(f"\nRSS samples every $SAMPLE_SECONDS s: {', '.join(f'{m:.1f}' for _, m in rows)}")
PY
log "report written to $OUT (RSS samples: $SAMPLES)"
