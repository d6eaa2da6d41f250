# syntax=docker/dockerfile:1.6
# One image for every pod of both routes: plain Flyte tasks, the Spark operator's driver and executors (Spark route),
# and the MPI operator's launcher and workers (MPI route).
#
#   docker build -t REGISTRY/flytekitplugins-horovod:TAG .                       # CPU: Horovod's CPU operations
#   docker build --build-arg BASE_IMAGE=nvidia/cuda:13.0.0-cudnn-devel-ubuntu24.04 \
#       --build-arg GPU=1 -t REGISTRY/flytekitplugins-horovod:TAG-gpu .          # GPU: Horovod's NCCL operations
#   pyflyte --pkgs workflows package --image REGISTRY/flytekitplugins-horovod:TAG     # or: pyflyte register --image ...
#
# The CPU image gets torch==2.15.0 from PyPI, which serves the CUDA 13 build on Linux (several GB; it runs
# on the CPU); add --build-arg TORCH_INDEX_URL=<PyTorch's CPU wheel index> for the CPU-only wheel. TensorFlow is the
# `tensorflow` wheel (tf-keras requires it; it runs on the CPU where no GPU is). The GPU image builds on a CUDA
# *devel* image matching torch's CUDA (nvcc and NCCL, which Horovod's NCCL operations compile against; Ubuntu 24.04's
# Python 3.12 is installed when the base image has none).
#
# Python packages come from scripts/setup.sh with constraints.txt, the same script and pins as a local set-up, so the
# image and a developer's .venv cannot drift (tests/cluster/test_dockerfile.py checks this file against both).
# See docs/deploy.md.
ARG BASE_IMAGE=python:3.12-slim-bookworm
FROM ${BASE_IMAGE}

# Empty: the TensorFlow distribution constraints.txt pins (tensorflow, with tf-keras); setup.sh installs its version.
ARG TF_PACKAGE=
# 1: setup.sh builds Horovod with HOROVOD_GPU_OPERATIONS=NCCL (needs a CUDA devel base image).
ARG GPU=0
# A package index for torch (setup.sh passes it to uv as --index-url); empty: PyPI.
ARG TORCH_INDEX_URL=

# System packages: Java 17 for Spark; OpenMPI (mpirun, and mpicc so Horovod builds its MPI controller); ssh client and
# server for launchers that reach workers over SSH (MPI Operator v2, horovodrun outside Kubeflow); cmake and g++ to
# build Horovod, and patch (the build command patches its sdist: the plugin's patches/); procps (ps, used by Spark's scripts); tini,
# which the Spark entrypoint runs commands under; Python 3.12 from the distribution where the base image has none.
# (/usr/share/man/man1 first: slim images leave out man pages, and the JDK's post-install step links one there.)
RUN mkdir -p /usr/share/man/man1 \
    && apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        openjdk-17-jre-headless \
        openmpi-bin libopenmpi-dev \
        openssh-client openssh-server \
        cmake g++ patch \
        procps tini \
        $(command -v python3.12 >/dev/null || echo python3.12 python3.12-venv python3.12-dev) \
    && rm -rf /var/lib/apt/lists/* \
    && mkdir -p /run/sshd

# The code lives where `pyflyte package` expects it by default (--in-container-source-path /root); the virtual
# environment where flytekit's serialization points by default (--python-interpreter /opt/venv/bin/python3).
WORKDIR /root
ENV VENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH \
    PYTHONPATH=/root \
    SPARK_HOME=/opt/venv/lib/python3.12/site-packages/pyspark \
    PYSPARK_PYTHON=/opt/venv/bin/python3

# Dependencies first, so code changes do not reinstall them. The editable install of this project only needs its
# package folders to exist (and the Flyte 2 plugin's flytekit-plugin module, which `import flytekit` loads); the real
# code is copied over them below.
COPY pyproject.toml constraints.txt README.md /root/
COPY plugins/horovod-flyte-runtime/pyproject.toml plugins/horovod-flyte-runtime/README.md /root/plugins/horovod-flyte-runtime/
COPY plugins/flytekit-horovod/pyproject.toml plugins/flytekit-horovod/README.md /root/plugins/flytekit-horovod/
COPY plugins/flyte-horovod/pyproject.toml plugins/flyte-horovod/README.md /root/plugins/flyte-horovod/
COPY scripts/setup.sh /root/scripts/setup.sh
# setup.sh builds Horovod with the plugin's build command (python -m horovod_flyte_runtime.build, the one
# horovod_image_spec runs too) and its patch series; the command imports no other module of the runtime.
COPY plugins/horovod-flyte-runtime/src/horovod_flyte_runtime/build.py \
     plugins/horovod-flyte-runtime/src/horovod_flyte_runtime/build_info.py \
     plugins/horovod-flyte-runtime/src/horovod_flyte_runtime/frameworks.py \
     /root/plugins/horovod-flyte-runtime/src/horovod_flyte_runtime/
COPY plugins/horovod-flyte-runtime/src/horovod_flyte_runtime/patches \
     /root/plugins/horovod-flyte-runtime/src/horovod_flyte_runtime/patches
RUN mkdir -p plugins/flytekit-horovod/flytekitplugins/horovod plugins/flyte-horovod/src/flyteplugins/horovod rossmann \
    && touch plugins/horovod-flyte-runtime/src/horovod_flyte_runtime/__init__.py \
             plugins/flytekit-horovod/flytekitplugins/horovod/__init__.py \
             plugins/flyte-horovod/src/flyteplugins/horovod/__init__.py \
             plugins/flyte-horovod/src/flyteplugins/horovod_migrate.py rossmann/__init__.py
# The Horovod wheel the build command makes is kept in its cache (/root/.cache/flytekitplugins-horovod), here a
# BuildKit cache, so a rebuild does not recompile it.
RUN --mount=type=cache,target=/root/.cache \
    VENV=/opt/venv TF_PACKAGE=${TF_PACKAGE} GPU=${GPU} TORCH_INDEX_URL=${TORCH_INDEX_URL} WITH_MPI=1 EXTRAS=test \
    bash scripts/setup.sh

COPY . /root
COPY docker/entrypoint.sh /opt/entrypoint.sh
RUN chmod 0755 /opt/entrypoint.sh && python -c "import flytekitplugins.horovod, flyteplugins.horovod, rossmann"

# driver | executor (Spark operator) | any other command, run as given (pyflyte-execute, mpirun, horovodrun, ...).
ENTRYPOINT ["/opt/entrypoint.sh"]
