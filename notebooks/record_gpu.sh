#!/usr/bin/env bash
# Records notebook 6 (06_gpu.ipynb) on a GPU machine: builds the CUDA programs and the CPU ones, executes
# the notebook there (its cells then run live: build, kernel tests, a GPU training run, the same model on the
# CPU, the checkpoint round trip), which writes every command's output to notebooks/gpu_recording/*.txt and
# saves the outputs into the notebook itself. Elsewhere the notebook replays those recordings.
#
#   notebooks/record_gpu.sh            (from anywhere; run in a checkout of this repository, about 5 minutes)
#
# Without nvcc on the GPU machine, build elsewhere beforehand (`make lib build/train cuda`) and bring
# build/libmesanet_f32.so, build/train, build/test_cuda and build/train_cuda along.
#
# Then bring back notebooks/06_gpu.ipynb and notebooks/gpu_recording/ (the only files it writes in the
# repository; the training run's checkpoint goes to /tmp) and commit them.
# Needs: an NVIDIA GPU of compute capability 9.0 (H100/H200: the kernels use wgmma), nvcc and cuBLAS,
# OpenBLAS and libstb for the CPU programs, and a python3 with numpy; with nbclient, nbformat and ipykernel
# too the notebook runs in a Jupyter kernel, else in-process (on Debian, as root, .ci/setup installs them all;
# set PYTHON to use another interpreter).
set -eu
cd "$(dirname "$0")/.."
if ! command -v nvidia-smi > /dev/null || ! nvidia-smi -L > /dev/null 2>&1; then
    echo "record_gpu: no GPU here (nvidia-smi)"; exit 1
fi
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
if [ -x "$NVCC" ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get > /dev/null; then ./.ci/setup; fi
    make -s lib build/train && make -s cuda NVCC="$NVCC"
else    # a GPU machine without the toolchain: the programs come from the development machine
    echo "record_gpu: no nvcc here: using build/ as carried (make lib build/train cuda on the development machine)"
fi
for f in build/libmesanet_f32.so build/train build/test_cuda build/train_cuda; do
    [ -e "$f" ] || { echo "record_gpu: $f missing"; exit 1; }
    if ldd "$f" | grep -q 'not found'; then
        echo "record_gpu: $f lacks libraries here:"; ldd "$f" | grep 'not found'; exit 1
    fi
done
PYTHON=${PYTHON:-$(command -v /usr/bin/python3 || command -v python3)}
"$PYTHON" -c "import numpy" || { echo "record_gpu: $PYTHON has no numpy (set PYTHON)"; exit 1; }
# with Jupyter the notebook runs in a kernel; without it nbtool runs its cells in-process (text outputs)
plain=--plain
"$PYTHON" -c "import nbclient, nbformat, ipykernel" 2> /dev/null && plain=
mkdir -p notebooks/gpu_recording
"$PYTHON" notebooks/nbtool.py update $plain notebooks/06_gpu.ipynb
ls -l notebooks/gpu_recording
echo "record_gpu: done; commit notebooks/06_gpu.ipynb and notebooks/gpu_recording/"
