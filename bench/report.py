#!/usr/bin/env python3
"""Turns the raw measurements of bench/load.sh or bench/size-study.sh into
markdown: each figure as the median of the runs with [min-max], and the
targets of issue 7 as ratios computed run by run, so that a noisy machine
moves nodescope and its floors together.

Raw rows are tab-separated: run, allocator, server, endpoint, test, metric, value.

  report.py load RAW_TSV
  report.py size RAW_TSV
  report.py oha OHA_JSON                 (prints "rps p50 p99 p999 ok errors")
  report.py h2load STDOUT DURATION_S     (same, from h2load's output and STDOUT.log)
"""

import json
import statistics
import sys
from collections import defaultdict

SERVERS = ["naive_floor", "transport_floor", "nodescope"]
THROUGHPUT_TESTS = [("c16", "HTTP/1.1, 16 conns"), ("c64", "HTTP/1.1, 64 conns"), ("h2", "HTTP/2, 4 conns x 16 streams")]


def oha_summary(path):
    with open(path) as f:
        data = json.load(f)
    summary = data.get("summary", {})
    pct = data.get("latencyPercentiles", {})
    codes = data.get("statusCodeDistribution", {}) or {}
    errors = data.get("errorDistribution", {}) or {}
    ok = int(codes.get("200", 0))
    bad = sum(int(v) for k, v in codes.items() if k != "200") + sum(int(v) for v in errors.values())
    # oha reports latencies in seconds; a rate counts only 200s.
    total = summary.get("total") or 0
    rps = ok / total if total else 0.0

    def ms(key):
        value = pct.get(key)
        return "nan" if value is None else f"{value * 1000:.4f}"

    print(f"{rps:.1f} {ms('p50')} {ms('p99')} {ms('p99.9')} {ok} {bad}")


def h2load_summary(path, duration):
    """h2load's stdout for counts, its --log-file (start us, status, duration
    us per request) for percentiles."""
    import re
    text = open(path).read()
    m = re.search(r"requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored, (\d+) timeout", text)
    ok = int(m.group(4)) if m else 0
    bad = (int(m.group(5)) + int(m.group(6)) + int(m.group(7))) if m else 1
    m = re.search(r"status codes: (\d+) 2xx", text)
    if m:
        bad += ok - int(m.group(1))
        ok = int(m.group(1))
    latencies = []
    with open(path + ".log") as f:
        for line in f:
            parts = line.split("\t")
            if len(parts) >= 3 and parts[1].startswith("2"):
                latencies.append(int(parts[2]) / 1000.0)
    latencies.sort()

    def pct(q):
        if not latencies:
            return "nan"
        return f"{latencies[min(len(latencies) - 1, int(q * len(latencies)))]:.4f}"

    rps = ok / float(duration)
    print(f"{rps:.1f} {pct(0.5)} {pct(0.99)} {pct(0.999)} {ok} {bad}")


def load_rows(path):
    # data[(alloc, server, endpoint, test, metric)][run] = value
    data = defaultdict(dict)
    allocs, runs = [], set()
    with open(path) as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) != 7:
                continue
            run, alloc, server, endpoint, test, metric, value = parts
            try:
                v = float(value)
            except ValueError:
                continue
            data[(alloc, server, endpoint, test, metric)][run] = v
            if alloc not in allocs:
                allocs.append(alloc)
            runs.add(run)
    return data, allocs, sorted(runs)


def stat(values, fmt="{:.0f}"):
    values = [v for v in values if v == v]  # drop NaN
    if not values:
        return "n/a"
    med = statistics.median(values)
    if len(values) == 1:
        return fmt.format(med)
    return f"{fmt.format(med)} [{fmt.format(min(values))}-{fmt.format(max(values))}]"


def get(data, alloc, server, endpoint, test, metric):
    return data.get((alloc, server, endpoint, test, metric), {})


def cell(data, alloc, server, endpoint, test, metric, fmt="{:.0f}"):
    return stat(list(get(data, alloc, server, endpoint, test, metric).values()), fmt)


def per_run_max(data, alloc, server, endpoint, tests=("c16", "c64")):
    """Max throughput of one server in each run: the best of the 16- and
    64-connection HTTP/1.1 runs."""
    out = {}
    for test in tests:
        for run, v in get(data, alloc, server, endpoint, test, "rps").items():
            out[run] = max(out.get(run, 0.0), v)
    return out


def ratio(num, den):
    return [num[r] / den[r] for r in num if r in den and den[r] > 0]


def verdict(values, ok):
    values = [v for v in values if v == v]
    if not values:
        return "not measured"
    med = statistics.median(values)
    return "**meets**" if ok(med) else "**misses**"


def report_load(path):
    data, allocs, runs = load_rows(path)
    out = []
    w = out.append
    w(f"Each cell: median [min-max] of {len(runs)} runs. Floors run on the same TLS/HTTP stack, in the same run, same allocator.\n")
    for alloc in allocs:
        w(f"### Allocator: {alloc}\n")
        w("#### Max throughput (requests/s, 200 OK only)\n")
        w("| server | endpoint | " + " | ".join(t[1] for t in THROUGHPUT_TESTS) + " | server CPU us/request (c16) | server CPU busy % (c16) |")
        w("|---|---|" + "---|" * (len(THROUGHPUT_TESTS) + 2))
        for server in SERVERS:
            for endpoint in ("mutate", "validate"):
                if not get(data, alloc, server, endpoint, "c16", "rps"):
                    continue
                row = [cell(data, alloc, server, endpoint, t, "rps") for t, _ in THROUGHPUT_TESTS]
                row.append(cell(data, alloc, server, endpoint, "c16", "cpu_us_per_req", "{:.1f}"))
                row.append(cell(data, alloc, server, endpoint, "c16", "cpu_pct", "{:.0f}"))
                w(f"| {server} | /{endpoint} | " + " | ".join(row) + " |")
        w("")
        w("#### Latency at a fixed rate (ms; HTTP/1.1 keep-alive, 10 connections)\n")
        w("| server | endpoint | rate (req/s) | achieved | p50 | p99 | p99.9 | errors |")
        w("|---|---|---|---|---|---|---|---|")
        for server in SERVERS:
            for endpoint in ("mutate", "validate"):
                for rate in ("1000", "5000"):
                    test = f"r{rate}"
                    if not get(data, alloc, server, endpoint, test, "p99"):
                        continue
                    w(
                        f"| {server} | /{endpoint} | {rate} | {cell(data, alloc, server, endpoint, test, 'rps')} | "
                        f"{cell(data, alloc, server, endpoint, test, 'p50', '{:.3f}')} | "
                        f"{cell(data, alloc, server, endpoint, test, 'p99', '{:.3f}')} | "
                        f"{cell(data, alloc, server, endpoint, test, 'p999', '{:.3f}')} | "
                        f"{cell(data, alloc, server, endpoint, test, 'errors')} |"
                    )
        w("")
        w("#### Memory (MiB, VmRSS / VmHWM from /proc) and start-up\n")
        w("| server | RSS idle (no big store) | RSS after loading the store | RSS under load (max after a test) | peak VmHWM | start to /readyz 200 (ms) |")
        w("|---|---|---|---|---|---|")
        for server in SERVERS:
            if not get(data, alloc, server, "-", "start", "ready_ms"):
                continue
            w(
                f"| {server} | {cell(data, alloc, server, '-', 'idle', 'rss_mib', '{:.1f}')} | "
                f"{cell(data, alloc, server, '-', 'start', 'rss_mib', '{:.1f}') if server == 'nodescope' else 'n/a (no store)'} | "
                f"{cell(data, alloc, server, '-', 'load', 'rss_mib', '{:.1f}')} | "
                f"{cell(data, alloc, server, '-', 'load', 'hwm_mib', '{:.1f}')} | "
                f"{cell(data, alloc, server, '-', 'start', 'ready_ms', '{:.0f}')} |"
            )
        w("")
        w("#### Targets (ratios computed within each run, then median [min-max])\n")
        w("| target | measured | verdict |")
        w("|---|---|---|")
        naive_m = per_run_max(data, alloc, "naive_floor", "mutate")
        naive_v = per_run_max(data, alloc, "naive_floor", "validate")
        transport_m = per_run_max(data, alloc, "transport_floor", "mutate")
        ns_m = per_run_max(data, alloc, "nodescope", "mutate")
        ns_v = per_run_max(data, alloc, "nodescope", "validate")
        rows = [
            ("/mutate max throughput >= 1.5x naive floor", ratio(ns_m, naive_m), lambda m: m >= 1.5, "{:.2f}x"),
            ("/mutate max throughput >= 0.5x transport floor", ratio(ns_m, transport_m), lambda m: m >= 0.5, "{:.2f}x"),
            ("/validate (whole bundle) max throughput >= 1x naive floor", ratio(ns_v, naive_v), lambda m: m >= 1.0, "{:.2f}x"),
        ]
        # Server CPU per request is what one core's throughput is the inverse
        # of once the server is CPU-bound; it holds when a starved core or
        # load generator caps the measured rate.
        cpu = lambda server, endpoint: get(data, alloc, server, endpoint, "c16", "cpu_us_per_req")
        rows += [
            ("(CPU) /mutate: naive floor us/req / nodescope us/req >= 1.5", ratio(cpu("naive_floor", "mutate"), cpu("nodescope", "mutate")), lambda m: m >= 1.5, "{:.2f}x"),
            ("(CPU) /mutate: transport floor us/req / nodescope us/req >= 0.5", ratio(cpu("transport_floor", "mutate"), cpu("nodescope", "mutate")), lambda m: m >= 0.5, "{:.2f}x"),
            ("(CPU) /validate: naive floor us/req / nodescope us/req >= 1", ratio(cpu("naive_floor", "validate"), cpu("nodescope", "validate")), lambda m: m >= 1.0, "{:.2f}x"),
        ]
        for test, name in (("c16", "16 conns"), ("c64", "64 conns"), ("h2", "HTTP/2")):
            for endpoint, floor in (("mutate", "naive_floor"), ("mutate", "transport_floor"), ("validate", "naive_floor")):
                num = get(data, alloc, "nodescope", endpoint, test, "rps")
                den = get(data, alloc, floor, endpoint, test, "rps")
                if num and den:
                    rows.append((f"(detail) /{endpoint} / {floor}, {name}", ratio(num, den), None, "{:.2f}x"))
        for endpoint in ("mutate", "validate"):
            p99 = list(get(data, alloc, "nodescope", endpoint, "r5000", "p99").values())
            rows.append((f"/{endpoint} p99 < 1 ms at 5,000 req/s, HTTP/1.1, one core", p99, lambda m: m < 1.0, "{:.3f} ms"))
        after = list(get(data, alloc, "nodescope", "-", "start", "rss_mib").values())
        rows.append(("RSS < 64 MiB with the store loaded (before traffic)", after, lambda m: m < 64, "{:.1f} MiB"))
        under = list(get(data, alloc, "nodescope", "-", "load", "rss_mib").values())
        rows.append(("RSS < 64 MiB with the store loaded, under load", under, lambda m: m < 64, "{:.1f} MiB"))
        hwm = list(get(data, alloc, "nodescope", "-", "load", "hwm_mib").values())
        rows.append(("peak RSS (VmHWM, includes start-up) < 64 MiB", hwm, lambda m: m < 64, "{:.1f} MiB"))
        ready = list(get(data, alloc, "nodescope", "-", "start", "ready_ms").values())
        rows.append(("ready in < 2 s with the store", ready, lambda m: m < 2000, "{:.0f} ms"))
        for name, values, ok, fmt in rows:
            w(f"| {name} | {stat(values, fmt)} | {verdict(values, ok) if ok else ''} |")
        w("")
    if len(allocs) > 1:
        w("### Allocator comparison (nodescope, max throughput per run, mimalloc / system)\n")
        w("| endpoint | test | ratio |")
        w("|---|---|---|")
        a, b = allocs[0], allocs[1]
        for endpoint in ("mutate", "validate"):
            for test, name in THROUGHPUT_TESTS:
                num = get(data, b, "nodescope", endpoint, test, "rps")
                den = get(data, a, "nodescope", endpoint, test, "rps")
                w(f"| /{endpoint} | {name} | {stat(ratio(num, den), '{:.2f}x')} ({b} / {a}) |")
        w("")
    print("\n".join(out))


def report_size(path):
    data, allocs, runs = load_rows(path)
    out = []
    w = out.append
    w(f"One node-scoped VPA (the node-exporter DaemonSet of the captured review); each cell median [min-max] of {len(runs)} runs.\n")
    for alloc in allocs:
        w(f"### Allocator: {alloc}\n")
        w("| nodes | store file (MiB) | RSS after load (MiB) | start to /readyz (ms) | /mutate req/s (16 conns) | server CPU us/request | p50 at 1,000 req/s (ms) | p99 at 1,000 req/s (ms) |")
        w("|---|---|---|---|---|---|---|---|")
        sizes = sorted({k[2] for k in data if k[0] == alloc}, key=lambda s: int(s))
        for nodes in sizes:
            w(
                f"| {int(nodes):,} | {cell(data, alloc, 'nodescope', nodes, 'store', 'file_mib', '{:.1f}')} | "
                f"{cell(data, alloc, 'nodescope', nodes, 'start', 'rss_mib', '{:.1f}')} | "
                f"{cell(data, alloc, 'nodescope', nodes, 'start', 'ready_ms')} | "
                f"{cell(data, alloc, 'nodescope', nodes, 'c16', 'rps')} | "
                f"{cell(data, alloc, 'nodescope', nodes, 'c16', 'cpu_us_per_req', '{:.1f}')} | "
                f"{cell(data, alloc, 'nodescope', nodes, 'r1000', 'p50', '{:.3f}')} | "
                f"{cell(data, alloc, 'nodescope', nodes, 'r1000', 'p99', '{:.3f}')} |"
            )
        if len(sizes) >= 2:
            small = get(data, alloc, "nodescope", sizes[0], "c16", "cpu_us_per_req")
            large = get(data, alloc, "nodescope", sizes[-1], "c16", "cpu_us_per_req")
            r = ratio(large, small)
            w(f"\nCPU per request at {int(sizes[-1]):,} nodes / at {int(sizes[0]):,} nodes, per run: {stat(r, '{:.2f}x')}")
        w("")
    print("\n".join(out))


if __name__ == "__main__":
    mode, path = sys.argv[1], sys.argv[2]
    if mode == "h2load":
        h2load_summary(path, sys.argv[3])
    else:
        {"oha": oha_summary, "load": report_load, "size": report_size}[mode](path)
