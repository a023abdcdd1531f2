#!/usr/bin/env bash
# Builds the CUPTI kernel tracer (trace.c) into .gpu/cupti/ with CUPTI 13.0 from its PyPI
# wheel (headers and libcupti.so.13, which travel with it: the device machines have no
# network). Run after `cargo xtask gpu-pack` (which rewrites .gpu/). On the device:
#   CUDA_INJECTION64_PATH=$PWD/.gpu/cupti/libtrace.so LD_LIBRARY_PATH=$PWD/.gpu/cupti \
#   CUPTI_TRACE_DIR=$OUT/trace <command>
# then python3 .gpu/cupti/summarize.py $OUT/trace.
set -euo pipefail
cd "$(dirname "$0")/../.."
WHEEL_DIR="${CUPTI_WHEEL_DIR:-.cuda-toolchain/cupti}"
if [ ! -e "$WHEEL_DIR/nvidia/cu13/lib/libcupti.so.13" ]; then
  python3 -m pip install --quiet --disable-pip-version-check --no-deps \
    --target "$WHEEL_DIR" nvidia-cuda-cupti==13.0.85
fi
ROOT="$WHEEL_DIR/nvidia/cu13"
CUDA_INC=".cuda-toolchain/nvidia/cu13/include"   # cuda.h (scripts/install-cuda-toolchain.sh)
[ -e "$CUDA_INC/cuda.h" ] || bash scripts/install-cuda-toolchain.sh >/dev/null
mkdir -p .gpu/cupti
cp "$ROOT/lib/libcupti.so.13" .gpu/cupti/
gcc -O2 -shared -fPIC -Wall -Wextra -o .gpu/cupti/libtrace.so scripts/cupti/trace.c \
  -I"$ROOT/include" -I"$CUDA_INC" -L.gpu/cupti -l:libcupti.so.13 -lpthread -Wl,-rpath,'$ORIGIN'
cp scripts/cupti/summarize.py .gpu/cupti/
echo "built .gpu/cupti/libtrace.so"
