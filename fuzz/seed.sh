#!/usr/bin/env bash
# Seeds fuzz/corpus/<target>/ from the captured AdmissionReviews and a few
# hand-written quantities. Safe to re-run: files are named by content.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
reviews="${REVIEWS:-$here/../tests/fixtures/admission-reviews}"
corpus="$here/corpus"
mkdir -p "$corpus"/{review_mutate,review_validate,quantity,json_to_cel,patch_builder}

put() { # target file-or-stdin
  local target=$1 tmp
  tmp="$(mktemp)"
  cat > "$tmp"
  mv "$tmp" "$corpus/$target/$(sha1sum < "$tmp" | cut -c1-16)" 2>/dev/null ||
    mv "$tmp" "$corpus/$target/seed-$RANDOM"
}

for f in "$reviews"/*.mutate.json "$here"/../examples/reviews/*.json; do
  put review_mutate < "$f"
done
for f in "$reviews"/*.validate.json; do
  put review_validate < "$f"
done
# The apiserver sends compact JSON (the fixtures are re-indented): the
# request path's scanners must see that form too.
for f in "$reviews"/*.json; do
  target=review_validate
  [[ $f == *.mutate.json ]] && target=review_mutate
  python3 -c 'import json, sys; print(json.dumps(json.load(open(sys.argv[1])), separators=(",", ":")))' "$f" | put "$target"
done

# json_to_cel: one selector byte (resource, high bit = UPDATE) then the
# object of each captured review, as JSON text.
i=0
for f in "$reviews"/*.json; do
  python3 - "$f" "$i" <<'PY' | put json_to_cel
import json, sys
review = json.load(open(sys.argv[1]))
obj = review["request"].get("object")
sel = int(sys.argv[2]) % 256
sys.stdout.buffer.write(bytes([sel]) + json.dumps(obj, separators=(",", ":")).encode())
PY
  i=$((i + 37))
done

# quantity: every resource quantity the captured reviews hold, plus edge cases.
python3 - "$reviews" <<'PY' > "$corpus/quantities.txt"
import json, os, sys
seen = set()
def walk(v):
    if isinstance(v, dict):
        for k, x in v.items():
            if k in ("requests", "limits", "target", "lowerBound", "upperBound",
                     "uncappedTarget", "minAllowed", "maxAllowed") and isinstance(x, dict):
                seen.update(s for s in x.values() if isinstance(s, str))
            walk(x)
    elif isinstance(v, list):
        for x in v:
            walk(x)
for name in os.listdir(sys.argv[1]):
    walk(json.load(open(os.path.join(sys.argv[1], name))))
seen.update(["0", "1", "100m", "1Gi", "1.5", "12e6", "-1", "1E", "8Ei", "9.223372036854775807E",
             "0.000000001", "1n", "1u", "1k", "1M", "1T", "1P", "1Ki", "1Pi", ".5", "5.", "+1",
             "1e-9", "1e308", "123456789012345678901234567890123456789", "1.0000000001"])
print("\n".join(sorted(seen)))
PY
while IFS= read -r q; do printf '%s' "$q" | put quantity; done < "$corpus/quantities.txt"
rm "$corpus/quantities.txt"

# patch_builder takes structured input (arbitrary::Arbitrary): random seeds
# are as good as any; libFuzzer grows them from an empty corpus.
for n in 1 2 3 4 5 6 7 8; do
  head -c $((n * 64)) /dev/urandom | put patch_builder
done

for t in "$corpus"/*; do echo "$(basename "$t"): $(ls "$t" | wc -l) seeds"; done
