"""The stall program of the tests and of scripts/reliability.py: two ranks out of step, or in step but slow. Run as a
user would run a script:

    python tests/support/stalled_rank.py ROUTE HOW [--stall-timeout S] [--start-timeout S]

    ROUTE  gloo | mpi (local processes) | spark (Spark tasks)
    HOW    uneven-torch | uneven-keras (rank 1 has 3 batches more than rank 0, which moves on to its end-of-epoch
           metric allreduce) | stuck (rank 1 sleeps in its own code, outside any collective, while rank 0 allreduces)
           | in-step (both ranks compute for 1.5 x S between two allreduces: no error) | before-init (rank 1 never
           reaches hvd.init())

Prints ``ERROR <type>`` (on a line of its own) and the error's message, or ``NO ERROR``; exits 1 when the run failed.
"""

import argparse
import sys
import time

from flytekitplugins.horovod import Horovod, HorovodRunner, RankFailedError, RankLostError

HOWS = ("uneven-torch", "uneven-keras", "stuck", "in-step", "before-init")
EXTRA_BATCHES = 3


def uneven_torch() -> int:
    import horovod.torch as hvd
    import torch

    model = torch.nn.Linear(4, 1)
    optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.01),
                                         named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    batches = 5 + (EXTRA_BATCHES if hvd.rank() == 1 else 0)
    loss = torch.tensor(0.0)
    for _ in range(batches):
        optimizer.zero_grad()
        loss = model(torch.randn(8, 4)).pow(2).mean()
        loss.backward()
        optimizer.step()
    hvd.allreduce(loss.detach(), name="epoch_loss")  # rank 0 is here while rank 1 still submits gradients
    return hvd.rank()


def uneven_keras() -> int:
    import horovod.tensorflow.keras as hvd
    import numpy as np
    import tensorflow as tf

    model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(1)])
    model.compile(optimizer=hvd.DistributedOptimizer(tf.keras.optimizers.SGD(0.01)), loss="mse")
    rows = 8 * (5 + (EXTRA_BATCHES if hvd.rank() == 1 else 0))
    model.fit(np.random.rand(rows, 4), np.random.rand(rows, 1), batch_size=8, epochs=1, verbose=0,
              callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0), hvd.callbacks.MetricAverageCallback()])
    return hvd.rank()


def stuck() -> int:
    import horovod.torch as hvd
    import torch

    hvd.allreduce(torch.tensor(1.0), name="warm_up")  # both ranks up and connected
    if hvd.rank() == 1:
        time.sleep(3600)  # a data loader that never yields
    for step in range(1000):
        hvd.allreduce(torch.tensor(1.0), name=f"step_{step}")
    return hvd.rank()


def in_step(seconds: float) -> int:
    import horovod.torch as hvd
    import torch

    hvd.allreduce(torch.tensor(1.0), name="before")
    time.sleep(seconds)  # a long step, on every rank
    hvd.allreduce(torch.tensor(1.0), name="after")
    return hvd.rank()


def before_init() -> int:
    import horovod.torch as hvd

    from horovod_flyte_runtime.rank_start import launched_rank

    if launched_rank() == 1:
        time.sleep(3600)  # an import or a data load that never finishes
    hvd.init()
    return hvd.rank()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("route", choices=("gloo", "mpi", "spark"))
    parser.add_argument("how", choices=HOWS)
    parser.add_argument("--stall-timeout", type=int, default=15)
    parser.add_argument("--start-timeout", type=int, default=30)
    args = parser.parse_args()
    framework = {"uneven-keras": "tensorflow", "before-init": None}.get(args.how, "pytorch")
    settings = Horovod(controller="mpi" if args.route == "mpi" else "gloo", framework=framework,
                       stall_timeout=args.stall_timeout, start_timeout=args.start_timeout)
    runner = HorovodRunner(np=2 if args.route == "spark" else -2, settings=settings)
    fn = {"uneven-torch": uneven_torch, "uneven-keras": uneven_keras, "stuck": stuck, "before-init": before_init}
    kwargs = {"seconds": 1.5 * args.stall_timeout} if args.how == "in-step" else {}
    started = time.monotonic()
    try:
        runner.run(fn.get(args.how, in_step), **kwargs)
    except (RankFailedError, RankLostError) as exc:
        # on a line of its own even if a rank's output ended mid-line just before
        print(f"\nERROR {type(exc).__name__}\n{exc}\nTOOK {time.monotonic() - started:.1f}", flush=True)
        return 1
    print(f"NO ERROR\nTOOK {time.monotonic() - started:.1f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
