#!/usr/bin/env bash
# Sets up everything this project needs, from nothing, and is quick when nothing changed:
#   system packages (Java for pyspark, OpenMPI and an ssh client for mpirun, cmake, g++ and patch for Horovod),
#   a virtual environment in .venv, TensorFlow and PyTorch first, then the plugin and this project (both editable)
#   and their pinned dependencies, then Horovod built against both frameworks by the plugin's build command
#   (python -m horovod_flyte_runtime.build: the sdist with the plugin's patch series, Gloo, plus MPI when OpenMPI
#   is present). Its build is reported from what really runs: a framework counts only if its hvd.init() and a 1-rank
#   allreduce work.
# The Dockerfile runs this same script, so the image and a local set-up install the same pins.
#
# Environment: VENV (default .venv), PYTHON (default: Python 3.12, found on PATH or under pyenv), CONSTRAINTS (default
# constraints.txt: the 2026 stack; make matrix's legacy leg passes matrix/legacy-constraints.txt), TF_PACKAGE (default:
# the TensorFlow distribution the constraints pin: tensorflow, which tf-keras requires, or tensorflow-cpu on the legacy
# stack), TORCH_INDEX_URL (a package index for torch, e.g. a CPU-only or a CUDA one; default: PyPI),
# GPU (0|1: build Horovod's NCCL operations, needs CUDA and NCCL), WITH_MPI (auto|0|1), EXTRAS (default test).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=${VENV:-$ROOT/.venv}
CONSTRAINTS=${CONSTRAINTS:-$ROOT/constraints.txt}
PYTHON_VERSION=${PYTHON_VERSION:-$(sed -nE 's/^# python ([0-9.]+)$/\1/p' "$CONSTRAINTS")}  # the constraints' header says
TF_PACKAGE=${TF_PACKAGE:-$(grep -qE '^tensorflow-cpu==' "$CONSTRAINTS" && echo tensorflow-cpu || echo tensorflow)}
TORCH_INDEX_URL=${TORCH_INDEX_URL:-}
GPU=${GPU:-0}
WITH_MPI=${WITH_MPI:-auto}
EXTRAS=${EXTRAS:-test}
PLUGIN=$ROOT/plugins/flytekit-horovod  # the plugin: its own distribution, installed before the example project
RUNTIME=$ROOT/plugins/horovod-flyte-runtime  # the runtime under both plugins, its own distribution too
RUNTIME_PKG=$RUNTIME/src/horovod_flyte_runtime  # its build command (build.py) and Horovod patch series (patches/)
export TF_CPP_MIN_LOG_LEVEL=3 PIP_DISABLE_PIP_VERSION_CHECK=1
say() { echo "[setup] $*" >&2; }

# The interpreter: PYTHON if given, else pythonX.Y on PATH when it really runs (a pyenv shim whose version is not
# selected answers "command not found"), else pyenv's or the system's installs of that version.
find_python() {
    local name=python$PYTHON_VERSION candidate
    for candidate in "${PYTHON:-}" "$name" "$(pyenv prefix "$PYTHON_VERSION" 2>/dev/null | head -1)/bin/$name" \
            $(ls -d "${PYENV_ROOT:-$HOME/.pyenv}"/versions/"$PYTHON_VERSION".*/bin/"$name" 2>/dev/null | sort -rV) \
            "/usr/bin/$name" "/usr/local/bin/$name"; do
        [ -n "$candidate" ] || continue
        if "$candidate" -c 'import sys, venv' >/dev/null 2>&1; then command -v "$candidate"; return 0; fi
    done
    return 1
}

# --- 1. system packages -----------------------------------------------------------------------
java_ok() {
    command -v java >/dev/null 2>&1 || return 1
    local v; v=$(java -version 2>&1 | head -1 | sed -E 's/.*version "([0-9]+)(\.([0-9]+))?.*/\1 \3/')
    set -- $v
    local major=$1; [ "$major" = 1 ] && major=${2:-0}
    case "$major" in 17|21) return 0 ;; *) say "java $major found; pyspark 4 needs 17 or 21"; return 1 ;; esac
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
# The build command and its patch series are part of the key: a changed patch rebuilds (its wheel cache is keyed too).
key=$(cat "$ROOT/pyproject.toml" "$RUNTIME/pyproject.toml" "$PLUGIN/pyproject.toml" "$ROOT/plugins/flyte-horovod/pyproject.toml" \
    "$CONSTRAINTS" "$ROOT/scripts/setup.sh" "$RUNTIME_PKG/build.py" "$RUNTIME_PKG"/patches/* | sha256sum | cut -c1-16)
key="$key-$TF_PACKAGE-gpu$GPU-mpi$WITH_MPI-$EXTRAS"
# The local Spark driver's class archive (horovod_flyte_runtime.class_archive: about 6 s less per local session),
# made once per Java and Spark install, in the user's cache; without it a local driver only starts slower.
class_archive() {
    "$VENV/bin/python" -m horovod_flyte_runtime.class_archive || say "no class archive made (above): local Spark sessions start slower"
}
if [ -x "$VENV/bin/python" ] && [ "$(cat "$VENV/.setup-key" 2>/dev/null)" = "$key" ]; then
    say "environment in $VENV is up to date"
    cat "$VENV/.horovod-build" 2>/dev/null || true  # what the build reported when it was made (make matrix reads it)
    class_archive
    exit 0
fi

# --- 3. virtual environment, TensorFlow, PyTorch, the plugin and this project, then Horovod -----------------------
if [ ! -x "$VENV/bin/python" ]; then
    PYTHON=$(find_python) || { say "Python $PYTHON_VERSION not found (on PATH, under pyenv, /usr/bin, /usr/local/bin). Install it" \
        "(Debian 13 / Ubuntu 24.04: apt-get install python$PYTHON_VERSION-venv python$PYTHON_VERSION-dev;" \
        "elsewhere: pyenv install $PYTHON_VERSION, or the python.org installer) or set PYTHON=/path/to/python$PYTHON_VERSION"; exit 1; }
    say "creating $VENV with $PYTHON"
    "$PYTHON" -m venv "$VENV"
fi
PIP=("$VENV/bin/python" -m pip --disable-pip-version-check -q)
pinned() { grep -iE "^${1//[-_]/[-_]}==" "$CONSTRAINTS" | cut -d= -f3 || true; }  # tf-keras is frozen as tf_keras; none: empty
"${PIP[@]}" install -c "$CONSTRAINTS" pip setuptools wheel uv
# The packages through uv, the installer of flytekit's image builder (ImageSpec): the same pins as pip resolves, about
# 1 minute instead of pip's 4.5 on 2 cores, and its cache (~/.cache/uv) is what tests/packaging's image-spec test
# installs from. Byte-compiled as pip does, so the first import of TensorFlow does not write its .pyc files.
UV=(env UV_COMPILE_BYTECODE=1 "$VENV/bin/uv" pip install --quiet --python "$VENV/bin/python")
tf_version=$(pinned "$TF_PACKAGE"); [ -n "$tf_version" ] || tf_version=$(pinned tensorflow)
tf_keras=$(pinned tf-keras)  # TensorFlow >= 2.16: Horovod's Keras API needs Keras 2, i.e. tf-keras
torch_version=$(pinned torch)
say "installing $TF_PACKAGE==$tf_version${tf_keras:+ with tf-keras==$tf_keras} and torch==$torch_version"
"${UV[@]}" -c "$CONSTRAINTS" "$TF_PACKAGE==$tf_version" ${tf_keras:+"tf-keras==$tf_keras"}
"${UV[@]}" -c "$CONSTRAINTS" ${TORCH_INDEX_URL:+--index-url "$TORCH_INDEX_URL"} "torch==$torch_version"

say "installing the runtime and the plugin (plugins/horovod-flyte-runtime, plugins/flytekit-horovod), the Rossmann project and their pinned dependencies"
"${UV[@]}" -c "$CONSTRAINTS" -e "$RUNTIME" -e "$PLUGIN" -e "$ROOT[$EXTRAS]"
# the Flyte 2 plugin where the stack has the flyte SDK (it needs protobuf >= 6.30: not beside TensorFlow 2.15)
if [ -n "$(pinned flyte)" ]; then
    say "installing the Flyte 2 plugin (plugins/flyte-horovod) and flyte==$(pinned flyte)"
    "${UV[@]}" -c "$CONSTRAINTS" -e "$ROOT/plugins/flyte-horovod[spark,migrate]"
fi

# Horovod through the plugin's own build command, the one a user runs (and the Dockerfile, and horovod_image_spec):
# the patched sdist built against both frameworks, every choice explicit, the wheel cached by what it was built
# against in the command's own cache (~/.cache/flytekitplugins-horovod, or FLYTE_HOROVOD_BUILD_CACHE), as pip keeps
# the wheels it builds: a second clone or environment of the same stack on this machine does not compile it again.
# It checks what really runs: hvd.init() and a 1-rank allreduce per framework, the controllers.
controllers=(gloo); [ "$WITH_MPI" = 1 ] && controllers+=(mpi)
operations=cpu; [ "$GPU" = 1 ] && operations=nccl
if ! "$VENV/bin/python" -m horovod_flyte_runtime.build --frameworks tensorflow pytorch \
        --controllers "${controllers[@]}" --operations "$operations" \
        | tee "$VENV/.horovod-build"; then
    say "horovod did not build, or hvd.init() and a 1-rank allreduce do not run in every framework (above)"
    exit 1
fi
"${PIP[@]}" check
# uv keeps each earlier build of an sdist-only package until it is pruned (pyspark's is 0.9 GB; a machine that set up
# clean clones all day held 50 of them, 45 GB, and a CI run on it stopped at "No space left on device")
"$VENV/bin/uv" cache prune --quiet || say "uv cache prune failed (above): ~/.cache/uv keeps its earlier builds"
class_archive
echo "$key" > "$VENV/.setup-key"
say "ready: $VENV"
