#!/usr/bin/env bash
# Sets up everything this project needs, from nothing, and is quick when nothing changed:
#   system packages (Java for pyspark, OpenMPI and an ssh client for mpirun, cmake, g++ and patch for Horovod),
#   a virtual environment in .venv, TensorFlow and PyTorch first, Horovod built against both (Gloo, plus MPI when
#   OpenMPI is present; patched for PyTorch >= 2.1, see scripts/patches/), then the plugin and this project (both
#   editable) and their pinned dependencies. Horovod's build is reported from what really runs: a framework counts
#   only if its hvd.init() and a 1-rank allreduce work (python -m flytekitplugins.horovod.build_info).
# The Dockerfile runs this same script, so the image and a local set-up install the same pins.
#
# Environment: VENV (default .venv), PYTHON (default python3.11), TF_PACKAGE (tensorflow-cpu or
# tensorflow), TORCH_INDEX_URL (a package index for torch, e.g. a CPU-only or a CUDA one; default: pip's own),
# GPU (0|1: build Horovod's NCCL operations, needs CUDA and NCCL), WITH_MPI (auto|0|1), EXTRAS (default test).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=${VENV:-$ROOT/.venv}
PYTHON=${PYTHON:-python3.11}
TF_PACKAGE=${TF_PACKAGE:-tensorflow-cpu}
TORCH_INDEX_URL=${TORCH_INDEX_URL:-}
GPU=${GPU:-0}
WITH_MPI=${WITH_MPI:-auto}
EXTRAS=${EXTRAS:-test}
CONSTRAINTS=$ROOT/constraints.txt
WHEELS=$ROOT/.cache/wheels
PLUGIN=$ROOT/plugins/flytekit-horovod  # the plugin: its own distribution, installed before the example project
HVD_PATCH=$ROOT/scripts/patches/horovod-0.28.1-cxx17.patch  # C++17 for PyTorch >= 2.1 (upstream PR 3998, unreleased)
export TF_CPP_MIN_LOG_LEVEL=3 PIP_DISABLE_PIP_VERSION_CHECK=1
say() { echo "[setup] $*" >&2; }

# --- 1. system packages -----------------------------------------------------------------------
java_ok() {
    command -v java >/dev/null 2>&1 || return 1
    local v; v=$(java -version 2>&1 | head -1 | sed -E 's/.*version "([0-9]+)(\.([0-9]+))?.*/\1 \3/')
    set -- $v
    local major=$1; [ "$major" = 1 ] && major=${2:-0}
    case "$major" in 8|11|17|21) return 0 ;; *) say "java $major found; pyspark 3.5 needs 8, 11, 17 or 21"; return 1 ;; esac
}
missing=()
java_ok || missing+=(openjdk-17-jre-headless)
if [ "$WITH_MPI" != 0 ]; then
    command -v mpicc >/dev/null 2>&1 || missing+=(openmpi-bin libopenmpi-dev)
    command -v ssh >/dev/null 2>&1 || missing+=(openssh-client)
fi
command -v cmake >/dev/null 2>&1 || missing+=(cmake)
command -v g++ >/dev/null 2>&1 || missing+=(g++)
command -v patch >/dev/null 2>&1 || missing+=(patch)
if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        say "installing system packages: ${missing[*]}"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    else
        say "missing system packages: ${missing[*]}"
        say "install them (Debian/Ubuntu: sudo apt-get install ${missing[*]}) and run this again"
        exit 1
    fi
fi
java_ok || { say "no usable Java after install"; exit 1; }
# For the multi-host tests only (tests/multihost: network namespaces, sshd in each worker host): installed as root
# on Debian like the packages above; elsewhere only reported, since those tests then skip and say why.
optional=()
[ -x /usr/sbin/sshd ] || command -v sshd >/dev/null 2>&1 || optional+=(openssh-server)
[ -x /usr/sbin/ip ] || [ -x /sbin/ip ] || command -v ip >/dev/null 2>&1 || optional+=(iproute2)
if [ ${#optional[@]} -gt 0 ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        say "installing system packages for the multi-host tests: ${optional[*]}"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        apt-get install -y -qq --no-install-recommends "${optional[@]}" >/dev/null
    else
        say "the multi-host tests need: ${optional[*]} (Debian/Ubuntu: sudo apt-get install ${optional[*]}); they skip without"
    fi
fi
if [ "$GPU" = 1 ] && ! command -v nvcc >/dev/null 2>&1; then
    say "GPU=1 builds Horovod's NCCL operations: it needs CUDA's nvcc on PATH and NCCL (a CUDA devel image)"
    exit 1
fi
if [ "$WITH_MPI" = auto ]; then
    if command -v mpicc >/dev/null 2>&1; then WITH_MPI=1; else WITH_MPI=0; fi
fi

# --- 2. is the environment already current? ---------------------------------------------------
key=$(cat "$ROOT/pyproject.toml" "$PLUGIN/pyproject.toml" "$CONSTRAINTS" "$ROOT/scripts/setup.sh" "$HVD_PATCH" \
    | sha256sum | cut -c1-16)
key="$key-$TF_PACKAGE-gpu$GPU-mpi$WITH_MPI-$EXTRAS"
if [ -x "$VENV/bin/python" ] && [ "$(cat "$VENV/.setup-key" 2>/dev/null)" = "$key" ]; then
    say "environment in $VENV is up to date"
    exit 0
fi

# --- 3. virtual environment, TensorFlow, PyTorch, Horovod, the rest ---------------------------
[ -x "$VENV/bin/python" ] || { say "creating $VENV"; "$PYTHON" -m venv "$VENV"; }
PIP=("$VENV/bin/python" -m pip --disable-pip-version-check -q)
pinned() { grep -E "^$1==" "$CONSTRAINTS" | cut -d= -f3; }
"${PIP[@]}" install -c "$CONSTRAINTS" pip setuptools wheel
tf_version=$(pinned tensorflow-cpu)
torch_version=$(pinned torch)
say "installing $TF_PACKAGE==$tf_version and torch==$torch_version"
"${PIP[@]}" install -c "$CONSTRAINTS" "$TF_PACKAGE==$tf_version"
"${PIP[@]}" install -c "$CONSTRAINTS" ${TORCH_INDEX_URL:+--index-url "$TORCH_INDEX_URL"} "torch==$torch_version"

# The wheel is cached per framework versions, GPU and MPI, and patch: built once, reinstalled in seconds.
hvd_version=$(pinned horovod)
patch_id=$(sha256sum "$HVD_PATCH" | cut -c1-8)
hvd_wheels="$WHEELS/horovod-$hvd_version-$TF_PACKAGE-$tf_version-torch-$torch_version-gpu$GPU-mpi$WITH_MPI-$patch_id"
if ! ls "$hvd_wheels"/horovod-*.whl >/dev/null 2>&1; then
    say "building horovod $hvd_version against $TF_PACKAGE $tf_version and torch $torch_version" \
        "(Gloo$([ "$WITH_MPI" = 1 ] && echo ', MPI')$([ "$GPU" = 1 ] && echo ', NCCL')); takes about 5 minutes"
    src=$(mktemp -d)
    trap 'rm -rf "$src"' EXIT
    "${PIP[@]}" download --no-deps --no-binary :all: -d "$src" "horovod==$hvd_version"
    tar -xzf "$src/horovod-$hvd_version.tar.gz" -C "$src"
    patch -s -p1 -d "$src/horovod-$hvd_version" < "$HVD_PATCH"
    build_env=(HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITH_PYTORCH=1 HOROVOD_WITH_GLOO=1 HOROVOD_WITHOUT_MXNET=1)
    if [ "$WITH_MPI" = 1 ]; then build_env+=(HOROVOD_WITH_MPI=1); else build_env+=(HOROVOD_WITHOUT_MPI=1); fi
    if [ "$GPU" = 1 ]; then build_env+=(HOROVOD_GPU_OPERATIONS=NCCL); fi
    mkdir -p "$hvd_wheels"
    env "${build_env[@]}" MAKEFLAGS="-j$(nproc)" "${PIP[@]}" wheel --no-cache-dir --no-build-isolation --no-deps \
        -w "$hvd_wheels" "$src/horovod-$hvd_version"
fi
"${PIP[@]}" install --force-reinstall --no-deps "$hvd_wheels"/horovod-*.whl

say "installing the plugin (plugins/flytekit-horovod), the Rossmann project and their pinned dependencies"
"${PIP[@]}" install -c "$CONSTRAINTS" -e "$PLUGIN" -e "$ROOT[$EXTRAS]"
# What the build really runs, not what horovodrun --check-build says (it counts a hollow horovod.torch as built).
if ! built=$("$VENV/bin/python" -m flytekitplugins.horovod.build_info --expect tensorflow pytorch); then
    say "horovod is installed but hvd.init() and a 1-rank allreduce do not run in every framework (above)"
    exit 1
fi
if [ "$WITH_MPI" = 1 ] && ! grep -q "controllers:.*MPI" <<<"$built"; then
    say "horovod was built without its MPI controller although OpenMPI is here: $built"
    exit 1
fi
say "horovod built with: $built"
"${PIP[@]}" check
echo "$key" > "$VENV/.setup-key"
say "ready: $VENV"
