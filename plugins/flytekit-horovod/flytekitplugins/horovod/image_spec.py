"""A flytekit ``ImageSpec`` for Horovod tasks: the frameworks you pick, OpenMPI, Java for Spark, and Horovod built by
the plugin's own build command (``python -m horovod_flyte_runtime.build``), the way the project's Dockerfile builds.

    from flytekitplugins.horovod import horovod_image_spec
    image = horovod_image_spec(registry="ghcr.io/me", packages=["my-package==1.0"])

    @task(task_config=MPIJob(worker=Worker(replicas=2)), container_image=image)
"""

from typing import Dict, List, Optional, Sequence

from flytekit import ImageSpec

from horovod_flyte_runtime.frameworks import LEGACY_KERAS_ENV

# Debian's packages every Horovod pod needs: Java for Spark, OpenMPI (mpirun; mpicc so Horovod builds its MPI
# controller), ssh for launchers that reach workers over SSH, and Horovod's build tools (cmake, g++, patch).
APT_PACKAGES = ["openjdk-17-jre-headless", "openmpi-bin", "libopenmpi-dev", "openssh-client", "openssh-server",
                "cmake", "g++", "patch", "procps"]
CUDA_BASE_IMAGE = "nvidia/cuda:13.0.0-cudnn-devel-ubuntu24.04"  # nvcc and NCCL headers (torch 2.15: CUDA 13)
PLUGIN_VERSION = "0.3.0"
RUNTIME_VERSION = "0.1.0"  # horovod-flyte-runtime, which the plugin runs on and whose build command builds Horovod


def _framework_packages(tensorflow: Optional[str], torch: Optional[str], mxnet: Optional[str],
                        gpu: bool) -> List[str]:
    packages = []
    if tensorflow and _keras3(tensorflow):
        # Horovod's Keras API needs Keras 2: tf-keras, under TF_USE_LEGACY_KERAS=1. tf-keras requires the `tensorflow`
        # distribution (which runs on the CPU where there is no GPU): tensorflow-cpu beside it would be a second
        # distribution over the same files.
        packages += [f"tensorflow=={tensorflow}", f"tf-keras~={'.'.join(tensorflow.split('.')[:2])}.0"]
    elif tensorflow:
        packages.append(f"{'tensorflow' if gpu else 'tensorflow-cpu'}=={tensorflow}")
    if torch:
        packages.append(f"torch=={torch}")
    if mxnet:
        packages += [f"mxnet=={mxnet}", "numpy<1.24"]  # MXNet 1.9 uses np.bool, removed in numpy 1.24
    return packages


def _keras3(tensorflow: str) -> bool:
    major, minor = (int(part) for part in tensorflow.split(".")[:2])
    return (major, minor) >= (2, 16)


# The paths the serialized commands name by default, linked to the image's Python where nothing is there yet: pyflyte
# register writes /opt/venv/bin/entrypoint.py into the MPI launcher command and /opt/venv/bin/python3 into a Spark
# job (its default interpreter), flytekitplugins-spark /usr/bin/python3 and /usr/local/bin/entrypoint.py for a
# Spark task whose image is an ImageSpec; flytekit's builder puts its Python elsewhere (/opt/micromamba/envs/runtime).
LINK_DEFAULT_PATHS = (
    "prefix=$(python3 -c 'import sys; print(sys.prefix)')"
    " && { [ -e /opt/venv ] || ln -s \"$prefix\" /opt/venv; }"
    " && { [ -e /usr/local/bin/entrypoint.py ] || ln -s \"$prefix/bin/entrypoint.py\" /usr/local/bin/entrypoint.py; }"
    " && { [ -e /usr/bin/python3 ] || ln -s \"$prefix/bin/python\" /usr/bin/python3; }"
)


def build_command(frameworks: Sequence[str], gpu: bool, controllers: Sequence[str] = ("gloo", "mpi")) -> str:
    """The build command an image runs once its Python packages are installed."""
    return (f"python -m horovod_flyte_runtime.build --frameworks {' '.join(frameworks)} "
            f"--controllers {' '.join(controllers)} --operations {'nccl' if gpu else 'cpu'}")


def horovod_image_spec(
    name: str = "flytekitplugins-horovod",
    *,
    python_version: str = "3.12",
    tensorflow: Optional[str] = "2.21.0",
    torch: Optional[str] = "2.15.0",
    mxnet: Optional[str] = None,
    gpu: bool = False,
    packages: Sequence[str] = (),
    plugin: str = f"flytekitplugins-horovod=={PLUGIN_VERSION}",
    runtime: str = f"horovod-flyte-runtime=={RUNTIME_VERSION}",
    registry: Optional[str] = None,
    base_image: Optional[str] = None,
    env: Optional[Dict[str, str]] = None,
    **image_spec_fields,
) -> ImageSpec:
    """An ``ImageSpec`` whose image runs every pod of both routes (task, Spark driver and executors, MPI launcher and
    workers) with Horovod built for the frameworks given.

    Args:
        python_version: the image's Python (3.11 or 3.12, the ones tested).
        tensorflow, torch, mxnet: the version of each framework to install and build Horovod for; None leaves it out.
            TensorFlow >= 2.16 comes with tf-keras and ``TF_USE_LEGACY_KERAS=1`` (Horovod's Keras API needs Keras 2).
        gpu: NCCL operations, on a CUDA devel base image (``base_image`` defaults to ``CUDA_BASE_IMAGE``), with the
            GPU wheels of the frameworks.
        packages: your own packages (your code's distribution, its dependencies), installed with the rest.
        plugin, runtime: how to install this plugin and the runtime it runs on (a version, a wheel file, a folder or a
            git URL).
        Everything else (``registry``, ``source_root``, ``copy``, ``pip_index`` ...) goes to ``ImageSpec`` as given.
    """
    frameworks = [fw for fw, version in (("tensorflow", tensorflow), ("pytorch", torch), ("mxnet", mxnet)) if version]
    if not frameworks:
        raise ValueError("horovod_image_spec: give at least one of tensorflow=, torch= or mxnet= (a version): Horovod "
                         "is built against the frameworks in the image")
    image_env = {LEGACY_KERAS_ENV: "1"} if tensorflow and _keras3(tensorflow) else {}
    image_env.update(env or {})
    return ImageSpec(
        name=name,
        python_version=python_version,
        base_image=base_image or (CUDA_BASE_IMAGE if gpu else None),
        apt_packages=APT_PACKAGES,
        # pip, setuptools and wheel: the build command builds with ``pip wheel --no-build-isolation`` in this Python
        packages=["pip", "setuptools", "wheel", *_framework_packages(tensorflow, torch, mxnet, gpu), runtime,
                  plugin, *packages],
        commands=[build_command(frameworks, gpu), LINK_DEFAULT_PATHS],
        env=image_env or None,
        registry=registry,
        **image_spec_fields,
    )
