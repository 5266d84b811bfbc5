#!/usr/bin/env bash
# Records notebook 6 (06_gpu.ipynb) on a GPU machine: builds the CUDA programs and the CPU ones, executes
# the notebook there (its cells then run live: build, kernel tests, a GPU training run, the same model on the
# CPU, the checkpoint round trip), which writes every command's output to notebooks/gpu_recording/*.txt and
# saves the outputs into the notebook itself. Elsewhere the notebook replays those recordings.
#
#   notebooks/record_gpu.sh            (from anywhere; run in a checkout of this repository, about 5 minutes)
#
# Then bring back notebooks/06_gpu.ipynb and notebooks/gpu_recording/ (the only files it writes in the
# repository; the training run's checkpoint goes to /tmp) and commit them.
# Needs: an NVIDIA GPU of compute capability 9.0 (H100/H200: the kernels use wgmma), nvcc and cuBLAS,
# OpenBLAS and libstb for the CPU programs, and a python3 with numpy, matplotlib, nbclient, nbformat and
# ipykernel (on Debian, as root, .ci/setup installs them; set PYTHON to use another interpreter).
set -eu
cd "$(dirname "$0")/.."
if ! command -v nvidia-smi > /dev/null || ! nvidia-smi -L > /dev/null 2>&1; then
    echo "record_gpu: no GPU here (nvidia-smi)"; exit 1
fi
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
[ -x "$NVCC" ] || { echo "record_gpu: nvcc not found (set NVCC)"; exit 1; }
if [ "$(id -u)" = 0 ] && command -v apt-get > /dev/null; then ./.ci/setup; fi
PYTHON=${PYTHON:-/usr/bin/python3}
"$PYTHON" -c "import numpy, matplotlib, nbclient, nbformat, ipykernel" || {
    echo "record_gpu: $PYTHON lacks numpy/matplotlib/nbclient/nbformat/ipykernel (set PYTHON)"; exit 1; }
make -s lib build/train build/generate
make -s cuda NVCC="$NVCC"
mkdir -p notebooks/gpu_recording
"$PYTHON" notebooks/nbtool.py update notebooks/06_gpu.ipynb
ls -l notebooks/gpu_recording
echo "record_gpu: done; commit notebooks/06_gpu.ipynb and notebooks/gpu_recording/"
