#!/usr/bin/env bash
# robustkit's GPU checks in one command, on a GPU machine without network access.
#
# Needs the archive tools/gpu_bundle.py builds (.gpu-bundle/gpu-bundle.tar.xz: the Python
# packages the image lacks, installed for its Python; the bert-tiny, rt and NLTK assets) beside
# the repository's working tree. Run from anywhere:
#
#   OUT=/some/folder bash bench/gpu_check.sh            # on the GPU machine
#   OUT=/tmp/rehearsal DEVICE=cpu SMALL=1 bash bench/gpu_check.sh   # a rehearsal on a CPU
#
# It unpacks the archive to $WORK (default /tmp/robustkit-gpu), puts its packages first on
# PYTHONPATH (they shadow the image's transformers 5.x: adapters 1.3.0 pins 4.57), sets the
# Hugging Face offline switches, ROBUSTKIT_CACHE and NLTK_DATA, then runs two Python processes
# (each start costs ~20 s there):
#   1. pytest: the gpu-marked tests (tests/test_gpu.py) and, on the machine's Python, the
#      OpenAttack import shim and the PWWS / DeepWordBug identity tests (CPU tests);
#   2. bench/gpu_benches.py: bench/trainers.py, bench/precision.py, bench/attack.py.
# Into $OUT (7 files): env.txt, pytest.log, bench-trainers.log, bench-precision.log,
# bench-attack.log, summary.txt (the benches' ratios) and status.txt (each step's exit code and
# seconds). Each step has a time limit (PYTEST_S, BENCH_S: 240 s each) so that one overrun leaves
# the rest: at most ~8.5 minutes in all, ~6 expected on an H100 machine (rehearsed on a loaded
# 2-core CPU at small sizes: 10 + 614 + 310 s).
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
OUT=${OUT:?set OUT to the folder the logs go to}
WORK=${WORK:-/tmp/robustkit-gpu}
BUNDLE=${BUNDLE:-$ROOT/.gpu-bundle/gpu-bundle.tar.xz}
DEVICE=${DEVICE:-cuda}
PY=${PYTHON:-python3}
PYTEST_S=${PYTEST_S:-240}
BENCH_S=${BENCH_S:-240}
mkdir -p "$OUT" "$WORK"
status() { echo "$*" >> "$OUT/status.txt"; }
: > "$OUT/status.txt"

start=$SECONDS
if [ ! -f "$WORK/BUNDLE.txt" ]; then
    # Python's tarfile where tar has no xz support
    tar -xJf "$BUNDLE" -C "$WORK" 2>/dev/null || "$PY" -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' \
        "$BUNDLE" "$WORK" || { status "unpack FAILED: $BUNDLE"; exit 1; }
fi
status "unpack: ok ($((SECONDS - start)) s)"

export PYTHONPATH="$WORK/site:$ROOT${PYTHONPATH:+:$PYTHONPATH}"
export ROBUSTKIT_CACHE="$WORK/cache" NLTK_DATA="$WORK/nltk_data"
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false

{
    echo "date: $(date -Is)"; echo "python: $($PY --version 2>&1)"; echo "device: $DEVICE"
    command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
    cat "$WORK/BUNDLE.txt"
    git log -1 --format='robustkit: %h %s' 2>/dev/null
} > "$OUT/env.txt" 2>&1

# Where torch sees no GPU (a rehearsal) the gpu tests are reported skipped, with the reason.
start=$SECONDS
# The attack tests are the OpenAttack identity tests, less the fast engine's lazy-vs-eager check
# (its own two paths, not OpenAttack's; a fifth of their time) and the shim's fresh-interpreter
# test (two more Python starts; on 3.12 this session's own `import OpenAttack` goes through it).
timeout "$PYTEST_S" "$PY" -m pytest -v -p no:cacheprovider -rs tests/test_gpu.py tests/test_openattack_compat.py \
    tests/test_attacks.py tests/test_attack_engine.py -k "not lazy_and_eager and not importing_robustkit_attacks_first" \
    > "$OUT/pytest.log" 2>&1
status "pytest: exit $? ($((SECONDS - start)) s)"

start=$SECONDS
timeout "$BENCH_S" "$PY" bench/gpu_benches.py --out "$OUT" --device "$DEVICE" ${SMALL:+--small} >> "$OUT/status.txt" 2>&1
status "benches: exit $? ($((SECONDS - start)) s)"
cat "$OUT/status.txt"
