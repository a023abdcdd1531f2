#!/usr/bin/env bash
# Runs on the GPU machine, from the packed folder made by `cargo xtask gpu-pack`
# (bin/ holds the stripped CUDA binaries, anchors/ the PyTorch anchor).
#
#   bash .gpu/run.sh JOB...      JOB: check | allreduce | anchor-allreduce | report | all
#
# It sets NCCL_NVLS_ENABLE=0 (mandatory on the H200 machines), finds the CUDA 13 / NCCL
# libraries the binaries need (failing with the names of the missing ones), then runs the
# jobs. Results go to $OUT (or ./gpu-out): results.jsonl, torch.jsonl, report/.
set -uo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
BIN="$HERE/bin"
RES="${OUT:-$PWD/gpu-out}"
mkdir -p "$RES"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export NCCL_DEBUG="${NCCL_DEBUG:-WARN}"

# ---- find the shared libraries --------------------------------------------------------
DIRS=()
GPU_LIB_DIRS="${GPU_LIB_DIRS:-}"
for d in ${GPU_LIB_DIRS//:/ } /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
         /usr/local/cuda-13*/targets/x86_64-linux/lib /usr/local/nvidia/lib64 /usr/local/nvidia/lib \
         /usr/lib/x86_64-linux-gnu /usr/lib64; do
  [ -d "$d" ] && DIRS+=("$d")
done
for nv in $(python3 -c 'import nvidia; print(" ".join(nvidia.__path__))' 2>/dev/null); do
  for d in "$nv"/cu13/lib "$nv"/nccl/lib "$nv"/*/lib; do [ -d "$d" ] && DIRS+=("$d"); done
done
LDP="${LD_LIBRARY_PATH:-}"
missing_of() { LD_LIBRARY_PATH="$LDP" ldd "$1" 2>/dev/null | awk '/=> not found/{print $1}' | sort -u; }
for b in "$BIN"/*; do
  for so in $(missing_of "$b"); do
    for d in "${DIRS[@]}"; do
      if [ -e "$d/$so" ]; then LDP="$d${LDP:+:$LDP}"; break; fi
    done
  done
  left="$(missing_of "$b")"
  if [ -n "$left" ]; then
    echo "FATAL: $(basename "$b") needs shared libraries that are not on this machine: $(echo $left)"
    echo "  searched: ${DIRS[*]}"
    case "$left" in *libcuda.so.1*) echo "  libcuda.so.1 is the NVIDIA driver: is this a GPU machine?";; esac
    exit 2
  fi
done
export LD_LIBRARY_PATH="$LDP"

job() {
  echo; echo "=== $1 ($(date -u +%T))"
  case "$1" in
    check)
      nvidia-smi -L; nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1 | sed 's/^/driver /'
      echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH NCCL_NVLS_ENABLE=$NCCL_NVLS_ENABLE"
      ldd "$BIN/bench" | grep -E 'cuda|nccl|cublas|curand' ;;
    allreduce)
      "$BIN/bench" allreduce --backend nccl --out "$RES/results.jsonl" ${ALLREDUCE_ARGS:-} ;;
    allreduce-cpu)
      "$BIN/bench" allreduce --backend cpu --ranks 2,4 --sizes-mib 0.5,1,10,50,100 --warmup 2 --iters 5 --out "$RES/results.jsonl" ;;
    anchor-allreduce)
      OUT="$RES" bash "$HERE/anchors/run_torch.sh" allreduce > /dev/null; grep '^{' "$RES/torch.jsonl" ;;
    report)
      "$BIN/bench" report --results "$RES/results.jsonl" --torch "$RES/torch.jsonl" --out "$RES/report" && cat "$RES/report/report.md" ;;
    *) echo "unknown job $1"; return 2 ;;
  esac
}
[ $# -eq 0 ] && set -- check allreduce anchor-allreduce report
RC=0
for j in "$@"; do job "$j" || { echo "=== job $j FAILED"; RC=1; }; done
exit $RC
