#!/usr/bin/env bash
# Sets up everything this project needs, from nothing, and is quick when nothing changed:
#   system packages (Java for pyspark, OpenMPI and an ssh client for mpirun, cmake and g++ for Horovod),
#   a virtual environment in .venv, TensorFlow first, Horovod built against it (Gloo, plus MPI when
#   OpenMPI is present), then the plugin and this project (both editable) and their pinned dependencies.
# The Dockerfile runs this same script, so the image and a local set-up install the same pins.
#
# Environment: VENV (default .venv), PYTHON (default python3.11), TF_PACKAGE (tensorflow-cpu or
# tensorflow), WITH_MPI (auto|0|1), EXTRAS (default test).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=${VENV:-$ROOT/.venv}
PYTHON=${PYTHON:-python3.11}
TF_PACKAGE=${TF_PACKAGE:-tensorflow-cpu}
WITH_MPI=${WITH_MPI:-auto}
EXTRAS=${EXTRAS:-test}
CONSTRAINTS=$ROOT/constraints.txt
WHEELS=$ROOT/.cache/wheels
PLUGIN=$ROOT/plugins/flytekit-horovod  # the plugin: its own distribution, installed before the example project
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
if [ "$WITH_MPI" = auto ]; then
    if command -v mpicc >/dev/null 2>&1; then WITH_MPI=1; else WITH_MPI=0; fi
fi

# --- 2. is the environment already current? ---------------------------------------------------
key=$(cat "$ROOT/pyproject.toml" "$PLUGIN/pyproject.toml" "$CONSTRAINTS" "$ROOT/scripts/setup.sh" | sha256sum | cut -c1-16)
key="$key-$TF_PACKAGE-mpi$WITH_MPI-$EXTRAS"
if [ -x "$VENV/bin/python" ] && [ "$(cat "$VENV/.setup-key" 2>/dev/null)" = "$key" ]; then
    say "environment in $VENV is up to date"
    exit 0
fi

# --- 3. virtual environment, TensorFlow, Horovod, the rest ------------------------------------
[ -x "$VENV/bin/python" ] || { say "creating $VENV"; "$PYTHON" -m venv "$VENV"; }
PIP=("$VENV/bin/python" -m pip --disable-pip-version-check -q)
"${PIP[@]}" install -c "$CONSTRAINTS" pip setuptools wheel
tf_version=$(grep -E "^tensorflow-cpu==" "$CONSTRAINTS" | cut -d= -f3)
say "installing $TF_PACKAGE==$tf_version"
"${PIP[@]}" install -c "$CONSTRAINTS" "$TF_PACKAGE==$tf_version"

hvd_version=$(grep -E "^horovod==" "$CONSTRAINTS" | cut -d= -f3)
hvd_wheels="$WHEELS/horovod-$hvd_version-$TF_PACKAGE-$tf_version-mpi$WITH_MPI"
check_build() { "$VENV/bin/horovodrun" --check-build 2>/dev/null || true; }
build_report=$(check_build)
wanted='\[X\] TensorFlow'; [ "$WITH_MPI" = 1 ] && wanted="$wanted|\[X\] MPI"
if [ "$(grep -c -E "$wanted" <<<"$build_report")" -lt "$([ "$WITH_MPI" = 1 ] && echo 3 || echo 1)" ]; then
    if ! ls "$hvd_wheels"/horovod-*.whl >/dev/null 2>&1; then
        say "building horovod $hvd_version against $TF_PACKAGE $tf_version (Gloo$([ "$WITH_MPI" = 1 ] && echo ', MPI')); takes about 4 minutes"
        mkdir -p "$hvd_wheels"
        build_env=(HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITH_GLOO=1 HOROVOD_WITHOUT_PYTORCH=1 HOROVOD_WITHOUT_MXNET=1)
        if [ "$WITH_MPI" = 1 ]; then build_env+=(HOROVOD_WITH_MPI=1); else build_env+=(HOROVOD_WITHOUT_MPI=1); fi
        env "${build_env[@]}" MAKEFLAGS="-j$(nproc)" "${PIP[@]}" wheel --no-cache-dir --no-build-isolation --no-deps --no-binary horovod -w "$hvd_wheels" "horovod==$hvd_version"
    fi
    "${PIP[@]}" install --force-reinstall --no-deps "$hvd_wheels"/horovod-*.whl
fi

say "installing the plugin (plugins/flytekit-horovod), the Rossmann project and their pinned dependencies"
"${PIP[@]}" install -c "$CONSTRAINTS" -e "$PLUGIN" -e "$ROOT[$EXTRAS]"
build_report=$(check_build)  # horovodrun needs the dependencies the project install just added
if [ "$(grep -c -E "$wanted" <<<"$build_report")" -lt "$([ "$WITH_MPI" = 1 ] && echo 3 || echo 1)" ]; then
    say "horovod is installed but 'horovodrun --check-build' does not show the expected frameworks:"
    echo "$build_report" >&2
    exit 1
fi
say "horovod built with: $(grep -E '\[X\]' <<<"$build_report" | tr -s ' ' | paste -sd' ')"
"${PIP[@]}" check
echo "$key" > "$VENV/.setup-key"
say "ready: $VENV"
