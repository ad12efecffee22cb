#!/usr/bin/env python3
"""What a nodescope process holds at its heap peak, by nodescope's own
frame: reads heaptrack's peak-cost stacks (`heaptrack_print -f FILE.zst
--flamegraph-cost-type peak -F stacks.txt`) and charges each stack's bytes
to its innermost frame in nodescope's code (else its innermost kube or
serde frame), so the table says which of the component's structures hold
the bytes. Usage: bench/heaptrack-owners.py stacks.txt [TOP]

With a massif file (`heaptrack_print -f FILE.zst -M out.massif`) instead,
the heap of the last snapshot before shutdown frees it: what the process
holds between passes, not at its peak."""
import re
import sys
from collections import Counter


def clean(frame):
    f = frame.replace("$LT$", "<").replace("$GT$", ">").replace("$u20$", " ").replace("$C$", ",")
    f = f.replace("$RF$", "&").replace("$u7b$", "{").replace("$u7d$", "}").replace("..", "::")
    f = re.sub(r"::h[0-9a-f]{16}$", "", f)
    return f.lstrip("_")


def owner(stack):
    frames = [clean(f) for f in stack.split(";")]
    for prefix in ("nodescope::", "kube_runtime::", "kube_client::", "serde_json::", "hyper::"):
        for f in reversed(frames):
            if prefix in f and "alloc::" not in f.split(prefix)[0][-8:]:
                return f[:160]
    return frames[-1][:160] if frames else "?"


def heap_between_passes(path):
    """The heap of the last massif snapshot before shutdown frees it."""
    heaps = [int(l.split("=")[1]) for l in open(path, encoding="utf-8", errors="replace")
             if l.startswith("mem_heap_B=")]
    top = max(heaps[-200:])
    return next(h for h in reversed(heaps) if h >= top * 0.5)


def main():
    top = int(sys.argv[2]) if len(sys.argv) > 2 else 12
    held = Counter()
    title = "held at the heap peak by"
    if sys.argv[1].endswith(".massif"):
        print(f"heap between passes: {heap_between_passes(sys.argv[1]) / 1048576:.1f} MiB")
        return
    for line in open(sys.argv[1], encoding="utf-8", errors="replace"):
        stack, _, cost = line.rstrip("\n").rpartition(" ")
        if cost.isdigit() and int(cost) > 0:
            held[owner(stack)] += int(cost)
    total = sum(held.values())
    print(f"| {title} | MiB | share |\n|---|---|---|")
    for name, cost in held.most_common(top):
        print(f"| `{name}` | {cost / 1048576:.1f} | {100 * cost / max(total, 1):.0f}% |")
    print(f"| (all) | {total / 1048576:.1f} | |")


main()
