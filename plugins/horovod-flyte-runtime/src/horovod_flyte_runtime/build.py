"""Build Horovod for the frameworks installed in this Python environment: ``python -m horovod_flyte_runtime.build``.

Horovod's last release (0.28.1, June 2023) builds from its sdist against the frameworks already installed, and does not
build as released on Python 3.12, PyTorch >= 2.1 or TensorFlow >= 2.19. This command:

1. downloads the sdist (or takes ``--sdist``), applies the patch series shipped in ``patches/`` (each patch names the
   upstream change it mirrors and the versions that need it);
2. builds a wheel with every choice stated, never left to what CMake finds: ``HOROVOD_WITH_``/``WITHOUT_`` for each
   framework and controller, and CPU or NCCL operations;
3. caches the wheel under a name made of what it was built against (Python, each framework's version, controllers,
   operations, patch series), installs it, and reports what really runs: each framework's ``hvd.init()`` and a
   1-rank allreduce in a fresh process, and the controllers built (``build_info``).

It imports nothing of the plugin but ``build_info``, and no framework: the set-up runs it before Horovod exists.
"""

import argparse
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from .build_info import check
from .frameworks import FRAMEWORK_BUILDS

HOROVOD_VERSION = "0.28.1"
PATCHES = Path(__file__).with_name("patches")
# The frameworks a Horovod build can serve, by the ``Horovod(framework=...)`` name of each ("keras" is TensorFlow's).
BUILDABLE = ("tensorflow", "pytorch", "mxnet")
CONTROLLERS = ("gloo", "mpi")
OPERATIONS = ("cpu", "nccl")
# Where wheels and the sdist are kept: --cache-dir, else FLYTE_HOROVOD_BUILD_CACHE, else the user's cache folder.
DEFAULT_CACHE = Path(os.environ.get("FLYTE_HOROVOD_BUILD_CACHE") or Path(
    os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "flytekitplugins-horovod")


class BuildError(RuntimeError):
    """The build cannot start or did not produce a Horovod that runs; the message says why and what to do."""


def say(message: str) -> None:
    print(f"[horovod-build] {message}", file=sys.stderr, flush=True)


def series() -> List[Path]:
    """The patch files, in the order ``patches/series`` lists them."""
    names = [line.split("#", 1)[0].strip() for line in (PATCHES / "series").read_text().splitlines()]
    return [PATCHES / name for name in names if name]


def series_id() -> str:
    """A short hash of the patch series (its order and every patch's changes, not its header's prose): part of the
    wheel's cache key."""
    digest = hashlib.sha256()
    for patch in series():
        text = patch.read_text()
        body = re.search(r"^(diff |--- )", text, re.M)
        digest.update(patch.name.encode() + b"\0" + text[body.start() if body else 0:].encode())
    return digest.hexdigest()[:10]


def distribution_of(package: str) -> Optional[str]:
    """``name==version`` of the installed distribution that provides the import package ``package`` (None: none)."""
    if importlib.util.find_spec(package) is None:
        return None
    dists = importlib.metadata.packages_distributions().get(package, [])
    # tensorflow-cpu and tensorflow can both provide ``tensorflow`` (tf-keras pulls in the latter): the first listed
    for name in dists:
        try:
            return f"{name}=={importlib.metadata.version(name)}"
        except importlib.metadata.PackageNotFoundError:
            continue
    return f"{package}==unknown"


@dataclass
class BuildPlan:
    """What one build is made against and of; its ``key`` names the cached wheel."""

    horovod: str
    python: str
    platform: str
    frameworks: Dict[str, str]  # Horovod(framework=...) name -> "distribution==version" it is built against
    controllers: List[str]
    operations: str
    patches: str
    env: Dict[str, str] = field(default_factory=dict)

    @property
    def key(self) -> str:
        parts = [f"horovod-{self.horovod}", f"cp{self.python.replace('.', '')}"]
        parts += [dist.replace("==", "-") for dist in self.frameworks.values()]
        parts += ["-".join(self.controllers), self.operations, self.patches]
        return "-".join(parts)


def plan(frameworks: Optional[Sequence[str]], controllers: Optional[Sequence[str]], operations: str) -> BuildPlan:
    """Decide every choice of the build from the arguments and this environment, or say why it cannot be built."""
    installed = {name: distribution_of(FRAMEWORK_BUILDS[name].package) for name in BUILDABLE}
    if frameworks is None:
        frameworks = [name for name in BUILDABLE if installed[name]]
        if not frameworks:
            raise BuildError("no deep-learning framework is installed in this environment "
                             f"({sys.executable}): install TensorFlow, PyTorch or MXNet first, then run this again")
    missing = [name for name in frameworks if not installed[name]]
    if missing:
        raise BuildError(f"--frameworks {' '.join(missing)}: not installed in {sys.executable}; Horovod builds "
                         f"against the framework installed first (pip install "
                         f"{' '.join(FRAMEWORK_BUILDS[m].package for m in missing)}, then run this again)")
    has_mpicc = shutil.which("mpicc") is not None
    if controllers is None:
        controllers = ["gloo", "mpi"] if has_mpicc else ["gloo"]
    if "mpi" in controllers and not has_mpicc:
        raise BuildError("--controllers mpi: no mpicc on PATH; install OpenMPI with its compiler wrappers "
                         "(Debian/Ubuntu: apt-get install openmpi-bin libopenmpi-dev) or build with --controllers gloo")
    if operations == "nccl" and shutil.which("nvcc") is None:
        raise BuildError("--operations nccl: no nvcc on PATH; NCCL operations build against CUDA and NCCL "
                         "(a CUDA devel image), or build with --operations cpu")
    env = {"HOROVOD_WITHOUT_GLOO" if "gloo" not in controllers else "HOROVOD_WITH_GLOO": "1",
           "HOROVOD_WITH_MPI" if "mpi" in controllers else "HOROVOD_WITHOUT_MPI": "1"}
    for name in BUILDABLE:
        flag = FRAMEWORK_BUILDS[name].build_flag
        env[flag if name in frameworks else flag.replace("_WITH_", "_WITHOUT_")] = "1"
    if operations == "nccl":
        env.update(HOROVOD_GPU="CUDA", HOROVOD_GPU_OPERATIONS="NCCL")
    else:  # patches/0008: no CUDA looked for, even with a CUDA build of torch and a partial toolkit on the machine
        env.update(HOROVOD_WITHOUT_GPU="1")
    env["HOROVOD_BUILD_TYPE"] = "Release"  # patches/0013: -O3 without -g (15-33% less compile time per TF op file)
    return BuildPlan(
        horovod=HOROVOD_VERSION, python=f"{sys.version_info.major}.{sys.version_info.minor}",
        platform=sysconfig.get_platform(), frameworks={name: installed[name] for name in frameworks},
        controllers=[c for c in CONTROLLERS if c in controllers], operations=operations, patches=series_id(), env=env)


def sdist(cache: Path, given: Optional[str]) -> Path:
    """Horovod's sdist: ``given``, or the one cached, or downloaded from the package index into the cache."""
    if given:
        if not Path(given).is_file():
            raise BuildError(f"--sdist {given}: no such file")
        return Path(given)
    target = cache / "sdist" / f"horovod-{HOROVOD_VERSION}.tar.gz"
    if not target.is_file():
        say(f"downloading horovod {HOROVOD_VERSION}'s sdist")
        target.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:",
                        "-d", str(target.parent), f"horovod=={HOROVOD_VERSION}"], check=True)
    return target


def patched_source(archive: Path, workdir: Path) -> Path:
    """Unpack the sdist into ``workdir`` and apply the series; a patch that does not apply stops the build."""
    with tarfile.open(archive) as tar:
        tar.extractall(workdir, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
    source = workdir / f"horovod-{HOROVOD_VERSION}"
    for patch in series():
        done = subprocess.run(["patch", "-p1", "--forward", "--batch", "--silent", "-i", str(patch)], cwd=source,
                              capture_output=True, text=True)
        if done.returncode != 0:
            raise BuildError(f"patch {patch.name} does not apply to horovod {HOROVOD_VERSION}'s sdist: "
                             f"{(done.stdout + done.stderr).strip()}")
    return source


def compile_wheel(build: BuildPlan, source: Path, out: Path, log: Path) -> None:
    """``pip wheel --no-build-isolation`` (so the build sees this environment's frameworks), its output in ``log``, a
    progress line every minute, and the log's tail in the error when it fails."""
    env = {**os.environ, **build.env, "MAKEFLAGS": f"-j{os.cpu_count() or 1}"}
    command = [sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "--no-cache-dir",
               "-w", str(out), str(source)]
    started, finished = time.monotonic(), threading.Event()

    def progress() -> None:
        while not finished.wait(60):
            say(f"still building ({(time.monotonic() - started) / 60:.0f} min; log: {log})")

    threading.Thread(target=progress, daemon=True).start()
    with log.open("w") as sink:
        done = subprocess.run(command, env=env, stdout=sink, stderr=subprocess.STDOUT)
    finished.set()
    if done.returncode != 0 or not list(out.glob("horovod-*.whl")):
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-40:])
        raise BuildError(f"building horovod failed (exit code {done.returncode}); the last lines of {log}:\n{tail}")


def wheel_for(build: BuildPlan, cache: Path, sdist_path: Optional[str], rebuild: bool) -> Path:
    """The cached wheel for ``build``, built first when there is none (or ``rebuild``)."""
    folder = cache / "wheels" / build.key
    wheels = sorted(folder.glob("horovod-*.whl"))
    if wheels and not rebuild:
        say(f"cached wheel for this build: {wheels[0]}")
        return wheels[0]
    archive = sdist(cache, sdist_path)
    say(f"building horovod {build.horovod} for {', '.join(build.frameworks.values())}; controllers "
        f"{', '.join(build.controllers)}; {build.operations.upper()} operations; {len(series())} patches "
        f"(about 3 minutes a framework on 2 cores)")
    started = time.monotonic()
    staging = Path(tempfile.mkdtemp(prefix="horovod-build-", dir=cache))
    try:
        source = patched_source(archive, staging)
        (staging / "wheel").mkdir()
        compile_wheel(build, source, staging / "wheel", cache / "build.log")
        if folder.exists():
            shutil.rmtree(folder)
        folder.parent.mkdir(parents=True, exist_ok=True)
        (staging / "wheel").rename(folder)  # the folder appears whole or not at all
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    (folder / "build.json").write_text(json.dumps({**asdict(build), "minutes": round(
        (time.monotonic() - started) / 60, 1)}, indent=1))
    say(f"built in {(time.monotonic() - started) / 60:.1f} min: {folder}")
    return next(folder.glob("horovod-*.whl"))


def report(build: BuildPlan) -> List[str]:
    """Check each framework really runs (fresh process: ``hvd.init()`` and a 1-rank allreduce); return the problems."""
    working, controllers, failed = check(list(build.frameworks))
    problems = [f"{name}: {reason}" for name, reason in failed.items()]
    problems += [f"controller {c}: requested but not in the build" for c in build.controllers
                 if {"gloo": "Gloo", "mpi": "MPI"}[c] not in controllers]
    print(f"horovod {build.horovod} for Python {build.python}: frameworks: {' '.join(working) or 'none'}; "
          f"controllers: {' '.join(controllers) or 'none'}; operations: {build.operations.upper()}; built against "
          f"{', '.join(build.frameworks.values())}; patches {build.patches}")
    return problems


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Build (or take from the cache), install and check Horovod for this environment's frameworks."""
    parser = argparse.ArgumentParser(prog="python -m horovod_flyte_runtime.build", description=main.__doc__)
    parser.add_argument("--frameworks", nargs="+", choices=BUILDABLE,
                        help="frameworks to build for (default: every one installed here)")
    parser.add_argument("--controllers", nargs="+", choices=CONTROLLERS,
                        help="default: gloo, and mpi when OpenMPI's mpicc is on PATH")
    parser.add_argument("--operations", choices=OPERATIONS, default="cpu",
                        help="cpu (default) or nccl (GPU collectives; needs CUDA's nvcc and NCCL)")
    parser.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE, help=f"default: {DEFAULT_CACHE}")
    parser.add_argument("--sdist", help="Horovod's sdist file, for a machine without a package index")
    parser.add_argument("--rebuild", action="store_true", help="build even when a cached wheel matches")
    parser.add_argument("--no-install", action="store_true", help="only build (or find) the wheel; print its path")
    parser.add_argument("--dry-run", action="store_true", help="print the build's choices and cache key, and stop")
    args = parser.parse_args(argv)
    try:
        build = plan(args.frameworks, args.controllers, args.operations)
        if args.dry_run:
            print(json.dumps({**asdict(build), "key": build.key}, indent=1))
            return 0
        args.cache_dir.mkdir(parents=True, exist_ok=True)
        wheel = wheel_for(build, args.cache_dir.resolve(), args.sdist, args.rebuild)
        if args.no_install:
            print(wheel)
            return 0
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--force-reinstall", "--no-deps", str(wheel)],
                       check=True)
        problems = report(build)
    except BuildError as error:
        say(str(error))
        return 1
    for problem in problems:
        say(problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
