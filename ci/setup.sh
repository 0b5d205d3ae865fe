#!/usr/bin/env bash
# Installs what parlab needs on Debian 12: Open MPI, libclang (bindgen for the
# mpi crate), and a project-local .venv with torch==2.13.0 and transformers.
# Idempotent: a second run checks and returns quickly.
set -euo pipefail
cd "$(dirname "$0")/.."

TORCH_VERSION=2.13.0
# The reference (tests/hf_crosscheck.py) pinned to the versions it was validated with: a new
# transformers may change what from_pretrained reads or reach for the hub.
TRANSFORMERS_VERSION=5.25.0
SAFETENSORS_VERSION=0.8.0
VENV=.venv

# pip into the venv, tried three times: one cut connection in a 4 GB download must not fail CI.
pip_install() {
  local try
  for try in 1 2 3; do
    "$VENV/bin/pip" install -q --disable-pip-version-check "$@" && return 0
    echo "parlab setup: pip install $* failed (try $try of 3)" >&2
    [ "$try" -lt 3 ] && sleep 15
  done
  return 1
}

# An apt or dpkg run killed half-way leaves dpkg asking to be configured: finish it first.
finish_dpkg() {
  if [ "$(id -u)" -eq 0 ] && command -v dpkg >/dev/null 2>&1; then
    dpkg --configure -a >/dev/null 2>&1 || true
  fi
}

# Debian's multiarch folder (x86_64-linux-gnu, aarch64-linux-gnu, ...): where libopenmpi-dev
# puts mpi.h.
multiarch=$(gcc -print-multiarch 2>/dev/null || true)
multiarch=${multiarch:-$(uname -m)-linux-gnu}
need_apt=()
command -v mpirun >/dev/null 2>&1 || need_apt+=(openmpi-bin)
[ -e "/usr/include/$multiarch/openmpi/mpi.h" ] || [ -n "$(ls "/usr/lib/$multiarch/openmpi/include/mpi.h" 2>/dev/null)" ] || need_apt+=(libopenmpi-dev)
ls /usr/lib/llvm-*/lib/libclang*.so* >/dev/null 2>&1 || need_apt+=(libclang-dev)
command -v clang >/dev/null 2>&1 || need_apt+=(clang)
command -v ip >/dev/null 2>&1 || [ -x /usr/sbin/ip ] || [ -x /sbin/ip ] || need_apt+=(iproute2)   # ip netns: the multi-host test
# Debian's python3 makes no venv without python3-venv (ensurepip); a Python with its own
# ensurepip (pyenv, a distribution that ships it) needs nothing.
# (A venv that failed for want of it has a python but no pip, and is made again below.)
if { [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -m pip --version >/dev/null 2>&1; } \
  && ! python3 -c 'import ensurepip' >/dev/null 2>&1; then
  need_apt+=(python3-venv)
fi

if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "parlab setup: missing system packages: ${need_apt[*]}" >&2
    echo "  install them with your package manager (Debian: sudo apt-get install ${need_apt[*]}) and rerun" >&2
    exit 2
  fi
  echo "parlab setup: apt-get install ${need_apt[*]}"
  export DEBIAN_FRONTEND=noninteractive
  finish_dpkg
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi

# Slurm and munge for the `launcher: srun` test (ci/slurm.sh): installed as root with apt, optional
# otherwise (that test is then skipped with a message). No service starts at install time:
# ci/slurm.sh runs its own daemons from a generated config.
want_slurm=()
for p in slurmd:slurmd slurmctld:slurmctld srun:slurm-client munged:munge; do
  command -v "${p%%:*}" >/dev/null 2>&1 || [ -x "/usr/sbin/${p%%:*}" ] || want_slurm+=("${p#*:}")
done
if [ ${#want_slurm[@]} -gt 0 ]; then
  if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "parlab setup: apt-get install ${want_slurm[*]} (for the Slurm test)"
    export DEBIAN_FRONTEND=noninteractive
    if [ ! -e /usr/sbin/policy-rc.d ]; then
      printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
      trap 'rm -f /usr/sbin/policy-rc.d' EXIT
    fi
    finish_dpkg
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${want_slurm[@]}" >/dev/null
  else
    echo "parlab setup: Slurm not installed (${want_slurm[*]}); the Slurm test will be skipped" >&2
  fi
fi

# A venv whose creation was killed has a python but no pip: made again.
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -m pip --version >/dev/null 2>&1; then
  echo "parlab setup: creating $VENV"
  python3 -m venv --clear "$VENV"
fi
if ! "$VENV/bin/python" -c "import torch, sys; sys.exit(torch.__version__.split('+')[0] != '$TORCH_VERSION')" 2>/dev/null; then
  echo "parlab setup: installing torch==$TORCH_VERSION into $VENV (large download, once)"
  pip_install "torch==$TORCH_VERSION"
fi
if ! "$VENV/bin/python" -c "import sys, transformers, safetensors; sys.exit((transformers.__version__, safetensors.__version__) != ('$TRANSFORMERS_VERSION', '$SAFETENSORS_VERSION'))" 2>/dev/null; then
  echo "parlab setup: installing transformers==$TRANSFORMERS_VERSION and safetensors==$SAFETENSORS_VERSION into $VENV"
  pip_install "transformers==$TRANSFORMERS_VERSION" "safetensors==$SAFETENSORS_VERSION"
fi
# nvcc's crt/ headers, which the CUDA runtime's headers include: build.rs compiles parlab's CUDA
# graph shim (harness/cuda_graph.cpp) against them where torch is a CUDA build. The CUDA wheels
# torch pulls in carry the runtime's headers but not these; the version follows the runtime's.
cuda_runtime=$("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("nvidia-cuda-runtime"))' 2>/dev/null || true)
cuda_include=$("$VENV/bin/python" -c 'import os, torch; print(os.path.join(os.path.dirname(os.path.dirname(torch.__file__)), "nvidia", "cu13", "include"))')
if [ -n "$cuda_runtime" ] && [ -e "$cuda_include/cuda_runtime_api.h" ] && [ ! -e "$cuda_include/crt/host_config.h" ]; then
  series=$(echo "$cuda_runtime" | cut -d. -f1-2)
  echo "parlab setup: installing nvidia-cuda-crt==$series.* (headers for the CUDA graph shim)"
  pip_install --no-deps "nvidia-cuda-crt==$series.*" ||
    echo "parlab setup: nvidia-cuda-crt not installed; parlab builds without CUDA graph capture" >&2
fi
echo "parlab setup: ok ($(mpirun --version 2>/dev/null | head -1); torch $("$VENV/bin/python" -c 'import torch; print(torch.__version__)'))"
