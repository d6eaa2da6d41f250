"""bench/vs_ddp.py's MPIJob task: bench/_ddp_body.py's Horovod training as the body of a task with the plugin's
defaults (``framework="auto"`` reads ``horovod.torch`` in the body's module), run by ``pyflyte run``."""

import json

from flytekit import task

from bench._ddp_body import train
from flytekitplugins.horovod import MPIJob, Worker


@task(task_config=MPIJob(worker=Worker(replicas=2)))
def horovod_body(prepared: str, hidden: str, steps: int, warmup: int, groups: int = 0) -> str:
    result = train("horovod", prepared, [int(h) for h in hidden.split(",")], 512, steps, warmup, threads=1,
                   groups=groups)
    return "RESULT " + json.dumps(result)
