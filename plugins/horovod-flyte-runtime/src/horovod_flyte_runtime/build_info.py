"""Which deep-learning frameworks this Horovod build serves.

``horovodrun --check-build`` cannot say: ``horovod.torch`` imports (as a hollow module, with no ``init``) even when
Horovod was built without PyTorch, and check-build counts that import as built. Here a framework counts when its
compiled Horovod extension is on disk and the framework itself is installed (``framework_built``: no import, so a
launcher can refuse a missing one before any rank starts), and ``python -m horovod_flyte_runtime.build_info``
proves it: in a fresh process per framework, ``hvd.init()`` and a 1-rank allreduce (what the set-up reports).

It imports nothing of the plugin but ``frameworks``: the set-up runs it before the plugin's other modules are there.
"""

import argparse
import glob
import importlib.util
import os
import subprocess
import sys
from typing import Dict, List, Optional, Sequence, Tuple

from .frameworks import FRAMEWORK_BUILDS


def horovod_dir() -> Optional[str]:
    """The installed ``horovod`` package's folder, found without importing it (None: Horovod is not installed)."""
    spec = importlib.util.find_spec("horovod")
    return os.path.dirname(spec.origin) if spec is not None and spec.origin else None


def framework_built(framework: str) -> bool:
    """Whether Horovod's extension for ``framework`` was compiled and the framework itself is installed."""
    build, root = FRAMEWORK_BUILDS[framework], horovod_dir()
    return (root is not None and bool(glob.glob(os.path.join(root, build.extension) + ".*"))
            and importlib.util.find_spec(build.package) is not None)


def built_frameworks() -> List[str]:
    """The ``Horovod(framework=...)`` values this build serves (see ``framework_built``)."""
    return [name for name in FRAMEWORK_BUILDS if framework_built(name)]


def missing_framework(framework: str) -> str:
    """Why ``framework`` cannot run here, what the build has, and how to rebuild."""
    build = FRAMEWORK_BUILDS[framework]
    root = horovod_dir()
    if root is None:
        problem = "Horovod is not installed in this Python environment"
    elif importlib.util.find_spec(build.package) is None:
        problem = f"{build.display} (the {build.package!r} package) is not installed"
    else:
        problem = f"this Horovod build has no {build.display} extension ({build.extension}.* under {root})"
    has = ", ".join(built_frameworks()) or "no framework"
    return (f"Horovod(framework={framework!r}): {problem}; this build serves: {has}. Install {build.package} first, "
            f"then rebuild Horovod against it: python -m horovod_flyte_runtime.build (it builds for every "
            f"framework installed; {build.build_flag}=1 is what it sets), or choose a framework this build serves")


def verify(framework: str, timeout: float = 120.0) -> Tuple[Optional[str], List[str]]:
    """Run ``hvd.init()`` and a 1-rank allreduce of ``framework``'s Horovod module in a fresh process. Returns None
    when it works, else the reason (the process's last line of error output), and the controllers (MPI, Gloo) the
    build has, as that module reports them."""
    if not framework_built(framework):
        return missing_framework(framework), []
    code = (f"import {FRAMEWORK_BUILDS[framework].module} as hvd; hvd.init(); {FRAMEWORK_BUILDS[framework].allreduce}; "
            "print(*[name for name, built in (('MPI', hvd.mpi_built()), ('Gloo', hvd.gloo_built())) if built]); "
            "hvd.shutdown()")
    env = {**os.environ, "HOROVOD_RANK": "0", "HOROVOD_SIZE": "1", "TF_CPP_MIN_LOG_LEVEL": "3"}
    try:
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return f"hvd.init() and a 1-rank allreduce took over {timeout:g} s", []
    out = done.stdout.strip().splitlines()
    if done.returncode == 0 and len(out) >= 2 and out[-2] == "1.0":
        return None, out[-1].split()
    lines = (done.stderr or done.stdout).strip().splitlines()
    return (lines[-1] if lines else f"exit code {done.returncode}"), []


def check(frameworks: Sequence[str]) -> Tuple[List[str], List[str], Dict[str, str]]:
    """``verify`` each of ``frameworks``: the display names of those that run, the controllers built (as the working
    frameworks report them), and why each other one does not run."""
    working, failed, controllers = [], {}, {}
    for name in frameworks:
        reason, built = verify(name)
        if reason is None:
            working.append(FRAMEWORK_BUILDS[name].display)
            controllers.update(dict.fromkeys(built))
        else:
            failed[name] = reason
    return working, list(controllers), failed


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Print the frameworks whose ``hvd.init()`` and allreduce really run, and the controllers built; exit 1 if one of
    ``--expect`` does not run."""
    parser = argparse.ArgumentParser(prog="python -m horovod_flyte_runtime.build_info", description=main.__doc__)
    parser.add_argument("--expect", nargs="*", default=[], choices=sorted(FRAMEWORK_BUILDS),
                        help="frameworks that must work")
    args = parser.parse_args(argv)
    working, controllers, failed = check([name for name in ("tensorflow", "pytorch", "mxnet")
                                          if framework_built(name) or name in args.expect])
    print(f"frameworks: {' '.join(working) or 'none'}; controllers: {' '.join(controllers) or 'none'}")
    missing = [name for name in args.expect if name in failed]
    for name in missing:
        print(f"{name}: {failed[name]}", file=sys.stderr)
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
