# Runs the gemm_norm_probe binary (see gemm_norm_probe.cu) once per configuration, each
# under a timeout, with the machine's cuBLASLt 13; one file per configuration under $OUT.
set -uo pipefail
export NCCL_NVLS_ENABLE=0
DIRS=""
for nv in $(python3 -c 'import nvidia; print(" ".join(nvidia.__path__))' 2>/dev/null); do
  for d in "$nv"/cu13/lib "$nv"/*/lib; do [ -e "$d/libcublasLt.so.13" ] && DIRS="$d:$DIRS"; done
done
for d in /usr/local/cuda/lib64 /usr/local/cuda-13*/targets/x86_64-linux/lib /usr/lib/x86_64-linux-gnu; do
  [ -e "$d/libcublasLt.so.13" ] && DIRS="$d:$DIRS"; done
export LD_LIBRARY_PATH="$DIRS${LD_LIBRARY_PATH:-}"
for r in ${RUNNERS:--1 0 1 2 3 4 5}; do
  timeout ${T:-25} .probe/gemm_norm_probe $r > "$OUT/probe-$r.txt" 2>&1; echo "runner $r rc $?" >> "$OUT/probe-$r.txt"
  grep -v '^{' "$OUT/probe-$r.txt" | grep -v "^#" | grep -v "^per step" 
done
