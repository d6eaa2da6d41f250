"""The Dockerfile, checked without Docker: it installs Python packages only through scripts/setup.sh with
constraints.txt (the local set-up's script and pins), its Python and Java match this environment, it builds nothing
the local set-up does not, and the paths flytekit serializes by default exist in it."""

import re
import shlex
import subprocess
import sys
from collections import OrderedDict
from importlib import metadata
from pathlib import Path

from tests.cluster import contract as c
from tests.conftest import ROOT, run_command

DOCKERFILE = ROOT / "Dockerfile"
SETUP_SH = (ROOT / "scripts" / "setup.sh").read_text()
BUILD_TOOLS = {"pip", "setuptools", "wheel"}


def instructions():
    """(INSTRUCTION, arguments) pairs, comments (and the syntax directive) dropped, continuation lines joined."""
    out, parts = [], []
    for line in DOCKERFILE.read_text().splitlines():
        stripped = line.strip()
        if stripped.startswith("#") or not stripped:
            continue
        parts.append(stripped[:-1].strip() if stripped.endswith("\\") else stripped)
        if not stripped.endswith("\\"):
            keyword, _, rest = " ".join(parts).partition(" ")
            out.append((keyword.upper(), rest.strip()))
            parts = []
    return out


def of(keyword):
    return [rest for kw, rest in instructions() if kw == keyword]


def env():
    values = {}
    for rest in of("ENV"):
        for item in shlex.split(rest):
            name, _, value = item.partition("=")
            values[name] = value
    return values


def arg_default(name):
    for rest in of("ARG"):
        key, _, default = rest.partition("=")
        if key == name:
            return default
    raise AssertionError(f"no ARG {name} in the Dockerfile")


def pins():
    result = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, version = line.partition("==")
            result[_norm(name)] = version.strip()
    return result


def _norm(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def setup_run():
    runs = [r for r in of("RUN") if "scripts/setup.sh" in r]
    assert len(runs) == 1, f"the image must run scripts/setup.sh exactly once, found {runs}"
    return runs[0]


# ---------------------------------------------------------------- same Python, same Java, same distribution
def test_base_image_python_matches_the_project_and_this_venv():
    assert of("FROM") == ["${BASE_IMAGE}"]
    base = arg_default("BASE_IMAGE")  # the CPU image's; a GPU build passes a CUDA devel image (see the next test)
    assert base == "python:3.12-slim-bookworm"
    minor = re.match(r"python:(\d+\.\d+)", base).group(1)
    assert f"{sys.version_info.major}.{sys.version_info.minor}" == minor  # this venv
    pyproject = (ROOT / "pyproject.toml").read_text()
    # the image's Python is the top of the project's range, the default stack's; the bottom (3.11) is the legacy leg's
    assert 'requires-python = ">=3.11,<3.13"' in pyproject and minor == "3.12"
    assert f"\n# python {minor}\n" in (ROOT / "constraints.txt").read_text()  # setup.sh's interpreter, as it reads it
    assert env()["SPARK_HOME"] == f"/opt/venv/lib/python{minor}/site-packages/pyspark"
    os_release = Path("/etc/os-release").read_text()
    assert "VERSION_CODENAME=bookworm" in os_release  # the same Debian release, so the same OpenMPI and Java


def test_system_packages_cover_what_setup_sh_would_install_and_java_matches():
    apt = " ".join(r for r in of("RUN") if "apt-get install" in r)
    for package in ("openjdk-17-jre-headless", "openmpi-bin", "libopenmpi-dev", "openssh-client", "openssh-server",
                    "cmake", "g++", "patch", "procps", "tini"):
        assert f" {package}" in apt, f"the image lacks {package}"
    # everything setup.sh apt-installs when missing is already there, so it installs no system package of its own
    for group in re.findall(r"missing\+=\(([^)]*)\)", SETUP_SH):
        for package in group.split():
            assert f" {package}" in apt, f"setup.sh may install {package}, the Dockerfile does not"
    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr
    assert re.search(r'version "17\.', java), java  # openjdk-17 here, openjdk-17-jre-headless there


# ---------------------------------------------------------------- same pins, same script
def test_python_packages_come_only_from_setup_sh_with_constraints():
    run = setup_run()
    assert "VENV=/opt/venv" in run and "TF_PACKAGE=${TF_PACKAGE}" in run and "WITH_MPI=1" in run
    assert "bash scripts/setup.sh" in run
    before_setup = next(i for i, (kw, rest) in enumerate(instructions()) if "scripts/setup.sh" in rest and kw == "RUN")
    copied = " ".join(rest for kw, rest in instructions()[:before_setup] if kw == "COPY")
    for needed in ("pyproject.toml", "constraints.txt", "scripts/setup.sh"):
        assert needed in copied, f"{needed} must be in the image before setup.sh runs"
    # nothing else installs Python packages or builds anything: every command of every RUN is one of these
    for rest in of("RUN"):
        for command in re.split(r"&&|;", re.sub(r"^(--\S+\s+)+", "", rest)):
            words = shlex.split(command)
            while words and re.match(r"^[A-Z_]+=", words[0]):
                words.pop(0)  # VAR=value prefixes
            if words[:2] == ["bash", "scripts/setup.sh"]:
                continue
            if words[:2] == ["python", "-c"]:
                assert re.fullmatch(r"import [\w., ]+", words[2]), command  # an import check, nothing installed
                continue
            assert words[0] in ("apt-get", "rm", "mkdir", "touch", "chmod"), f"unexpected build step: {command}"
            assert words[0] != "apt-get" or words[1] in ("update", "install"), command
    # setup.sh installs every package with the constraints (pip, then uv), except the Horovod wheel it built itself (--no-deps)
    installs = [line for line in SETUP_SH.splitlines() if '"${PIP[@]}" install' in line or '"${UV[@]}"' in line]
    assert installs and all('-c "$CONSTRAINTS"' in line or "--no-deps" in line for line in installs), installs
    assert "CONSTRAINTS=${CONSTRAINTS:-$ROOT/constraints.txt}" in SETUP_SH


def test_tf_package_build_argument_selects_a_pinned_wheel(tmp_path):
    assert arg_default("TF_PACKAGE") == ""  # setup.sh takes the distribution the constraints pin
    pinned = pins()
    # tf-keras (Horovod's Keras API needs Keras 2) requires `tensorflow` itself: tensorflow-cpu beside it would be a
    # second distribution over the same files
    assert "tensorflow" in pinned and "tensorflow-cpu" not in pinned
    assert pinned["tf-keras"].split(".")[:2] == pinned["tensorflow"].split(".")[:2]
    assert 'TF_PACKAGE=${TF_PACKAGE:-$(grep -qE \'^tensorflow-cpu==\' "$CONSTRAINTS" && echo tensorflow-cpu || echo tensorflow)}' \
        in SETUP_SH
    assert 'tf_version=$(pinned "$TF_PACKAGE")' in SETUP_SH and "torch_version=$(pinned torch)" in SETUP_SH
    line = next(line for line in SETUP_SH.splitlines() if line.startswith("pinned() {"))
    # set -euo pipefail, as setup.sh runs: a pin is found, and one the file lacks (the legacy leg has no tf-keras)
    # is empty instead of ending the set-up without a word
    constraints = tmp_path / "constraints.txt"
    constraints.write_text("tensorflow-cpu==2.15.1\ntorch==2.13.0\n")
    probe = (f"set -euo pipefail; CONSTRAINTS={shlex.quote(str(constraints))}; {line}\n"
             'tf=$(pinned tensorflow_cpu); keras=$(pinned tf-keras); torch=$(pinned torch); echo "[$tf] [$keras] [$torch]"')
    ran = subprocess.run(["bash", "-c", probe], capture_output=True, text=True)
    assert ran.returncode == 0 and ran.stdout == "[2.15.1] [] [2.13.0]\n", (ran.returncode, ran.stdout, ran.stderr)


def test_cpu_and_gpu_variants_build_horovod_for_both_frameworks_the_gpu_one_with_nccl():
    """One Dockerfile, two images: the defaults give the CPU one; BASE_IMAGE (a CUDA devel image), TF_PACKAGE=tensorflow
    and GPU=1 the GPU one, whose Horovod build adds NCCL operations. Both reach setup.sh, which builds Horovod with
    TensorFlow and PyTorch from the patched sdist, and checks nvcc before building for the GPU."""
    assert arg_default("GPU") == "0" and arg_default("TORCH_INDEX_URL") == ""
    run = setup_run()
    assert "GPU=${GPU}" in run and "TORCH_INDEX_URL=${TORCH_INDEX_URL}" in run
    header = DOCKERFILE.read_text().split("\nFROM", 1)[0]
    gpu_example = re.search(r"docker build (--build-arg BASE_IMAGE=(\S+) \\\n#\s+--build-arg GPU=1) ", header)
    assert gpu_example, header
    # nvcc and NCCL, of torch 2.15's CUDA (13)
    assert re.fullmatch(r"nvidia/cuda:13\.[\d.]+-cudnn-devel-ubuntu24\.04", gpu_example.group(2))
    apt = " ".join(r for r in of("RUN") if "apt-get install" in r)
    # a CUDA image has no python3.12 of its own: the image installs Ubuntu 24.04's where the base image has none
    assert "$(command -v python3.12 >/dev/null || echo python3.12 python3.12-venv python3.12-dev)" in apt
    assert 'operations=cpu; [ "$GPU" = 1 ] && operations=nccl' in SETUP_SH
    assert 'if [ "$GPU" = 1 ] && ! command -v nvcc' in SETUP_SH
    # Horovod comes from the plugin's build command, for both frameworks, with the operations chosen above
    build = re.search(r'"\$VENV/bin/python" -m horovod_flyte_runtime\.build (.*?)\n(.*?);', SETUP_SH, re.S)
    assert build and "--frameworks tensorflow pytorch" in build[0] and '--operations "$operations"' in build[0]
    copied = " ".join(of("COPY"))
    for needed in ("horovod_flyte_runtime/patches", "horovod_flyte_runtime/build.py",
                   "horovod_flyte_runtime/build_info.py", "horovod_flyte_runtime/frameworks.py"):
        assert needed in copied, f"the image must have {needed} before setup.sh runs"


def test_this_environment_is_exactly_the_pins_so_the_image_gets_the_same():
    """Every distribution here (pip, setuptools and wheel included) is pinned at the version installed here; the
    image installs through the same constraints, so any package resolved differently there would be an unpinned one,
    and there is none."""
    pinned = pins()
    # setuptools >= 71 puts its own vendored packages' folder on sys.path once something imports it; they come with
    # the pinned setuptools, not from pip
    installed = {_norm(d.metadata["Name"]): d.version for d in metadata.distributions()
                 if Path(str(d.locate_file(""))).parts[-2:] != ("setuptools", "_vendor")}
    for own in ("horovod-flyte-runtime", "flytekitplugins-horovod", "flyteplugins-horovod", "rossmann-horovod-flyte"):  # ours, editable
        installed.pop(own)
    unpinned = sorted(set(installed) - set(pinned))
    assert unpinned == [], f"installed but not pinned in constraints.txt (run scripts/freeze.sh): {unpinned}"
    # a local version label (torch's "+cpu" build here, the CUDA build in a GPU image) is the pinned release: PEP 440's
    # == matches it
    wrong = {name: (installed[name], version) for name, version in pinned.items()
             if name in installed and installed[name].split("+")[0] != version}
    assert wrong == {}, f"installed version differs from constraints.txt: {wrong}"
    absent = sorted(set(pinned) - set(installed))
    assert absent == [], absent
    assert BUILD_TOOLS <= set(pinned)  # the tools that build Horovod and the editable install are pinned too


# ---------------------------------------------------------------- where flytekit and the operators look
def test_serialization_defaults_point_into_the_image():
    from flytekit.clis.sdk_in_container.package import package as package_command
    from flytekit.configuration import DEFAULT_RUNTIME_PYTHON_INTERPRETER, ImageConfig, SerializationSettings
    from flytekit.tools.translator import get_serializable

    from tests.cluster.flows import cluster_flows as flows
    from tests.cluster.test_registration import FLOWS_DESIGN

    values = env()
    venv = str(Path(DEFAULT_RUNTIME_PYTHON_INTERPRETER).parent.parent)
    assert values["VENV"] == venv == "/opt/venv" and values["PATH"].startswith("/opt/venv/bin:")
    source_root = next(p.default for p in package_command.params if p.name == "in_container_source_path")
    assert of("WORKDIR") == [source_root] == ["/root"] and values["PYTHONPATH"] == source_root
    assert "COPY . /root" in [f"COPY {rest}" for rest in of("COPY")]

    # serialized with flytekit's defaults (as `pyflyte register --image ...` does), the commands name /opt/venv paths
    settings = SerializationSettings(image_config=ImageConfig.auto(img_name="registry.example/hvd:1"),
                                     project="p", domain="d", version="v1")
    for name in ("allreduce_mpi", "allreduce_gloo", "spark_allreduce"):
        spec = get_serializable(OrderedDict(), settings, getattr(flows, name))
        c.check_task(spec.template.to_flyte_idl(), FLOWS_DESIGN[name], DEFAULT_RUNTIME_PYTHON_INTERPRETER)


def test_entrypoint_is_spark_compatible_and_passes_other_commands_through():
    assert of("ENTRYPOINT") == ['["/opt/entrypoint.sh"]']
    assert "docker/entrypoint.sh /opt/entrypoint.sh" in of("COPY")
    script = (ROOT / "docker" / "entrypoint.sh").read_text()
    for needed in ("driver)", "executor)", "--deploy-mode client", "spark.driver.bindAddress=",
                   "org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend", "tini -s --"):
        assert needed in script, needed
    spark_home = Path(__import__("pyspark").__file__).parent  # the same pinned pyspark the image installs
    assert list((spark_home / "jars").glob("spark-kubernetes_*.jar")), "executor mode needs Spark's k8s backend"
    assert (spark_home / "bin" / "spark-submit").exists()
    ran = run_command(["bash", str(ROOT / "docker" / "entrypoint.sh"), sys.executable, "-c", "print('through')"])
    assert ran.returncode == 0 and ran.output.rstrip().endswith("through"), ran.output
    ran = run_command(["bash", str(ROOT / "docker" / "entrypoint.sh")])
    assert ran.returncode == 2 and "no command given" in ran.output


def test_dockerignore_keeps_the_local_environment_out_of_the_image():
    ignored = {line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()
               if line.strip() and not line.startswith("#")}
    assert {".venv", ".cache", ".git", "*.egg-info"} <= ignored


def test_deploy_doc_shows_building_and_registering_with_the_image():
    doc = (ROOT / "docs" / "deploy.md").read_text()
    for needed in ("docker build", "--build-arg TF_PACKAGE=tensorflow", "pyflyte register", "--image",
                   "pyflyte --pkgs workflows package", "spark", "mpi", "training-operator", "spark-operator",
                   "gang", "slots", "Fast registration of MPI-route tasks"):
        assert needed in doc, f"docs/deploy.md does not mention {needed!r}"
