# syntax=docker/dockerfile:1.6
# One image for every pod of both routes: plain Flyte tasks, the Spark operator's driver and executors (Spark route),
# and the MPI operator's launcher and workers (MPI route).
#
#   docker build -t REGISTRY/flytekitplugins-horovod:TAG .                                  # CPU (tensorflow-cpu)
#   docker build --build-arg TF_PACKAGE=tensorflow -t REGISTRY/flytekitplugins-horovod:TAG-gpu .   # GPU wheel
#   pyflyte --pkgs workflows package --image REGISTRY/flytekitplugins-horovod:TAG     # or: pyflyte register --image ...
#
# Python packages come from scripts/setup.sh with constraints.txt, the same script and pins as a local set-up, so the
# image and a developer's .venv cannot drift (tests/cluster/test_dockerfile.py checks this file against both).
# See docs/deploy.md.
FROM python:3.11-slim-bookworm

# tensorflow-cpu (default) or tensorflow (the GPU wheel); setup.sh installs the version pinned in constraints.txt.
ARG TF_PACKAGE=tensorflow-cpu

# System packages: Java 17 for Spark; OpenMPI (mpirun, and mpicc so Horovod builds its MPI controller); ssh client and
# server for launchers that reach workers over SSH (MPI Operator v2, horovodrun outside Kubeflow); cmake and g++ to
# build Horovod; procps (ps, used by Spark's scripts); tini, which the Spark entrypoint runs commands under.
# (/usr/share/man/man1 first: slim images leave out man pages, and the JDK's post-install step links one there.)
RUN mkdir -p /usr/share/man/man1 \
    && apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        openjdk-17-jre-headless \
        openmpi-bin libopenmpi-dev \
        openssh-client openssh-server \
        cmake g++ \
        procps tini \
    && rm -rf /var/lib/apt/lists/* \
    && mkdir -p /run/sshd

# The code lives where `pyflyte package` expects it by default (--in-container-source-path /root); the virtual
# environment where flytekit's serialization points by default (--python-interpreter /opt/venv/bin/python3).
WORKDIR /root
ENV VENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH \
    PYTHONPATH=/root \
    SPARK_HOME=/opt/venv/lib/python3.11/site-packages/pyspark \
    PYSPARK_PYTHON=/opt/venv/bin/python3

# Dependencies first, so code changes do not reinstall them. The editable install of this project only needs its
# package folders to exist; the real code is copied over them below.
COPY pyproject.toml constraints.txt README.md /root/
COPY plugins/flytekit-horovod/pyproject.toml plugins/flytekit-horovod/README.md /root/plugins/flytekit-horovod/
COPY scripts/setup.sh /root/scripts/setup.sh
RUN mkdir -p plugins/flytekit-horovod/flytekitplugins/horovod rossmann \
    && touch plugins/flytekit-horovod/flytekitplugins/horovod/__init__.py rossmann/__init__.py
# The Horovod wheel setup.sh builds is kept in a BuildKit cache (.cache/wheels), so a rebuild does not recompile it.
RUN --mount=type=cache,target=/root/.cache \
    VENV=/opt/venv TF_PACKAGE=${TF_PACKAGE} WITH_MPI=1 EXTRAS=test bash scripts/setup.sh

COPY . /root
COPY docker/entrypoint.sh /opt/entrypoint.sh
RUN chmod 0755 /opt/entrypoint.sh && python -c "import flytekitplugins.horovod, rossmann"

# driver | executor (Spark operator) | any other command, run as given (pyflyte-execute, mpirun, horovodrun, ...).
ENTRYPOINT ["/opt/entrypoint.sh"]
