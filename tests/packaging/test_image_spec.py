"""``horovod_image_spec``: the flytekit ``ImageSpec`` for Horovod tasks, checked without Docker. Its Dockerfile is the one
flytekit's own default builder writes from it (``create_docker_context``, what ``pyflyte register`` builds), and its
build steps (the packages, then the plugin's build command) run in a fresh virtual environment here."""

import os
import re
import subprocess
import sys

import pytest
from flytekit import task
from flytekit.configuration import DEFAULT_RUNTIME_PYTHON_INTERPRETER, ImageConfig, SerializationSettings
from flytekit.image_spec.default_builder import create_docker_context
from flytekit.tools.translator import get_serializable
from google.protobuf.json_format import MessageToDict

from flytekitplugins.horovod import HorovodSpark, MPIJob, Worker, horovod_image_spec
from flytekitplugins.horovod.image_spec import LINK_DEFAULT_PATHS
from tests.support import ROOT, run_command

PLUGIN = ROOT / "plugins" / "flytekit-horovod"
RUNTIME = ROOT / "plugins" / "horovod-flyte-runtime"


def test_the_default_spec_is_today_s_stack_with_horovod_built_by_the_plugin_s_command():
    spec = horovod_image_spec(registry="localhost:30000", packages=["my-package==1.0"])
    assert spec.python_version == "3.12" and spec.base_image is None  # flytekit's default Debian base
    assert {"tensorflow==2.21.0", "tf-keras~=2.21.0", "torch==2.15.0", "flytekitplugins-horovod==0.3.0", "horovod-flyte-runtime==0.1.0",
            "my-package==1.0"} <= set(spec.packages)
    assert not any(p.startswith("tensorflow-cpu") for p in spec.packages)  # tf-keras requires `tensorflow` itself
    assert spec.env == {"TF_USE_LEGACY_KERAS": "1"}  # tf.keras is Keras 2 in every process of the image
    assert spec.commands == ["python -m horovod_flyte_runtime.build --frameworks tensorflow pytorch "
                             "--controllers gloo mpi --operations cpu", LINK_DEFAULT_PATHS]
    # what the project's Dockerfile installs to build and run Horovod and Spark, the spec installs too
    for package in ("openjdk-17-jre-headless", "openmpi-bin", "libopenmpi-dev", "cmake", "g++", "patch"):
        assert package in spec.apt_packages
        assert package in (ROOT / "Dockerfile").read_text()
    assert spec.image_name().startswith("localhost:30000/flytekitplugins-horovod:")


def test_a_gpu_spec_builds_nccl_operations_on_a_cuda_devel_image_and_keras_2_stays_without_tf_keras():
    spec = horovod_image_spec(gpu=True, tensorflow="2.15.1", torch=None, python_version="3.11")
    assert re.fullmatch(r"nvidia/cuda:13\.[\d.]+-cudnn-devel-ubuntu24\.04", spec.base_image)  # torch 2.15's CUDA
    assert "tensorflow==2.15.1" in spec.packages and not any(p.startswith("tf-keras") for p in spec.packages)
    assert spec.env is None  # TF 2.15's tf.keras is Keras 2 already
    assert spec.commands[0].endswith("--frameworks tensorflow --controllers gloo mpi --operations nccl")
    with pytest.raises(ValueError, match="give at least one of tensorflow=, torch= or mxnet="):
        horovod_image_spec(tensorflow=None, torch=None)


def test_flytekit_s_builder_writes_a_dockerfile_that_builds_horovod_after_the_packages(tmp_path):
    create_docker_context(horovod_image_spec(), tmp_path)
    dockerfile = (tmp_path / "Dockerfile").read_text()
    requirements = (tmp_path / "requirements_uv.txt").read_text().split()
    assert "tf-keras~=2.21.0" in requirements and "flytekitplugins-horovod==0.3.0" in requirements
    assert "horovod-flyte-runtime==0.1.0" in requirements
    packages_at = dockerfile.index("--requirement requirements_uv.txt")
    build_at = dockerfile.index("python -m horovod_flyte_runtime.build")
    assert packages_at < build_at  # Horovod is built against the frameworks already installed
    assert re.search(r"apt-get install .*openmpi-bin", dockerfile, re.S) and "TF_USE_LEGACY_KERAS=1" in dockerfile


def _serialized(config, interpreter: str):
    def body(x: int) -> int:
        return x

    settings = SerializationSettings(image_config=ImageConfig.auto_default_image(), python_interpreter=interpreter)
    return get_serializable({}, settings, task(task_config=config)(body)).template.to_flyte_idl()


def test_the_commands_follow_the_python_interpreter_and_the_spec_s_python_is_the_one_to_name(tmp_path):
    """``pyflyte package --python-interpreter P`` (``pyflyte register``: always ``/opt/venv/bin/python3``) writes P's
    folder into the MPI launcher command (``python <folder>/entrypoint.py``) and P into the Spark job; the spec's
    image has its Python where flytekit's builder puts it, and links the default's paths to it (``docs/deploy.md``)."""
    create_docker_context(horovod_image_spec(), tmp_path)
    runtime_bin = re.search(r'^ENV PATH="([^:"]+):', (tmp_path / "Dockerfile").read_text(), re.M).group(1)
    assert runtime_bin == "/opt/micromamba/envs/runtime/bin"  # what deploy.md names
    for interpreter in (DEFAULT_RUNTIME_PYTHON_INTERPRETER, f"{runtime_bin}/python"):
        folder = os.path.dirname(interpreter)
        args = list(_serialized(MPIJob(worker=Worker(replicas=2)), interpreter).container.args)
        at = args.index("pyflyte-execute")
        assert args[at - 2:at] == ["python", f"{folder}/entrypoint.py"], args
        spark = MessageToDict(_serialized(HorovodSpark(num_proc=2), interpreter).custom)
        assert (spark["executorPath"], spark["mainApplicationFile"]) == (interpreter, f"local://{folder}/entrypoint.py")


@pytest.mark.slow
@pytest.mark.heavy  # 2-3 min of installs: shared by make test's two runs, to even them out
def test_the_spec_s_build_steps_run_in_a_fresh_virtual_environment(tmp_path):
    """The spec of this project's own stack, its packages installed into a fresh environment and its command run there:
    the plugin's build command finds the wheel scripts/setup.sh built for the same frameworks (the cache below) and
    reports both frameworks running."""
    tf, torch = (subprocess.run([sys.executable, "-m", "pip", "show", name], capture_output=True, text=True).stdout
                 for name in ("tensorflow", "torch"))
    version = lambda shown: re.search(r"^Version: ([\d.]+)", shown, re.M).group(1)  # noqa: E731
    spec = horovod_image_spec(python_version=f"{sys.version_info.major}.{sys.version_info.minor}",
                              tensorflow=version(tf), torch=version(torch), plugin=str(PLUGIN), runtime=str(RUNTIME))
    venv = tmp_path / "venv"
    # this environment's own interpreter (a fresh machine's python3.12 may be a pyenv shim that answers "not found")
    subprocess.run([os.path.realpath(sys.executable), "-m", "venv", str(venv)], check=True)
    # installed as flytekit's image builder installs a spec's packages (``uv pip install``, default_builder.py's
    # UV_PYTHON_INSTALL_COMMAND_TEMPLATE); the project's pins keep uv from resolving other versions than the cached
    # wheel was built against, and uv's cache (setup.sh's downloads) keeps this install to about half a minute
    uv = os.path.join(os.path.dirname(sys.executable), "uv")  # setup.sh's, pinned in constraints.txt
    installed = run_command([uv, "pip", "install", "--quiet", "--python", str(venv / "bin" / "python"),
                             "-c", str(ROOT / "constraints.txt"), *spec.packages], timeout=900)
    assert installed.returncode == 0, installed.output[-3000:]
    # the build command's own cache is the user's, where setup.sh's run of it left the wheel: no 5-minute compile
    env = {"PATH": f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    build, link = spec.commands
    ran = run_command(["bash", "-c", build], env=env, timeout=900)
    assert ran.returncode == 0, ran.output[-3000:]
    assert "cached wheel for this build" in ran.output
    assert re.search(r"frameworks: TensorFlow PyTorch; controllers: MPI Gloo; operations: CPU", ran.output), ran.output
    # the links, made in a mount namespace of their own whose /opt and /usr/local/bin are empty, as in flytekit's
    # Debian base (this machine's own are left alone): what pyflyte register names runs the image's Python
    check = ("mount -t tmpfs tmpfs /opt && mount -t tmpfs tmpfs /usr/local/bin && " + link +
             " && /opt/venv/bin/python3 /opt/venv/bin/entrypoint.py --help >/dev/null"
             " && /opt/venv/bin/python3 -c 'import horovod.torch, horovod.tensorflow; print(\"linked\")'"
             " && readlink /usr/local/bin/entrypoint.py")
    ran = run_command(["unshare", "--mount", "--propagation", "private", "bash", "-c", check], env=env, timeout=120)
    assert ran.returncode == 0 and "linked" in ran.output, ran.output[-3000:]
    assert ran.output.strip().splitlines()[-1] == f"{venv}/bin/entrypoint.py"
