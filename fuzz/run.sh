#!/bin/sh
# Builds and runs a fuzz target with libFuzzer on the STABLE toolchain: the sanitizer-coverage
# instrumentation cargo-fuzz would add via nightly-only flags is requested with stable -C flags.
#   fuzz/run.sh [target] [libFuzzer args...]      e.g. fuzz/run.sh decode_frame -max_total_time=60
set -e
cd "$(dirname "$0")"
TARGET=${1:-decode_frame}
[ $# -gt 0 ] && shift
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
# An explicit --target keeps RUSTFLAGS off build scripts (they must not be instrumented).
HOST=$(rustc -vV | sed -n 's/^host: //p')
RUSTFLAGS="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
 -Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
 -Cllvm-args=-sanitizer-coverage-trace-compares --cfg fuzzing" \
  cargo build --release --target "$HOST" --bin "$TARGET"
mkdir -p "corpus/$TARGET"
# Seed with the golden frames (request frames get a 0x00 kind byte).
if [ -z "$(ls -A "corpus/$TARGET")" ]; then
  python3 - "corpus/$TARGET" <<'PY'
import re, sys, pathlib
out = pathlib.Path(sys.argv[1])
root = pathlib.Path("../schemas/tests/golden")
for line in (root / "java_frames.txt").read_text().splitlines():
    name, hexs = line.split()
    frame = bytes.fromhex(hexs)
    if "response" in name:
        # kind 1, api key 18 + version (from the name), then the frame.
        v = int(re.search(r"_v(\d+)_", name).group(1))
        data = b"\x01" + (18).to_bytes(2, "big") + v.to_bytes(2, "big") + frame
    else:
        data = b"\x00" + frame
    (out / name).write_bytes(data)
(out / "kcat").write_bytes(b"\x00" + bytes.fromhex((root / "kcat_api_versions_v3_request.hex").read_text().strip()))
PY
fi
exec "$CARGO_TARGET_DIR/$HOST/release/$TARGET" -rss_limit_mb=512 -malloc_limit_mb=64 -max_len=65536 "corpus/$TARGET" "$@"
