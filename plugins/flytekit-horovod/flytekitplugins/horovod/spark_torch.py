"""Retries that resume for Horovod's PyTorch Estimator on Spark (``horovod.spark.torch.TorchEstimator``).

What Horovod 0.28.1 does (horovod/spark/torch/remote.py, estimator.py): after every epoch rank 0 saves the model and
optimizer state to ``<local run folder>/checkpoint`` and calls the store's ``sync`` (a copy of that folder to
``<store>/runs/<run_id>``); ``fit`` loads ``<store>/runs/<run_id>/checkpoint`` when it exists, but then trains
``epochs`` epochs again, with the learning rate divided by the number of ranks (the checkpoint holds the unscaled rate
and only a fresh start multiplies it).

``spark_torch_resume`` adds what a Flyte retry needs: a store whose per-epoch sync also copies that checkpoint to the
task's Flyte checkpoint as ``torch-estimator/epoch-<N>.pt`` (N: epochs finished); on a retry, the previous attempt's
newest one (restored by flytekit) is put where ``fit`` loads it, with the learning rate multiplied back, and the
epochs left are returned.
"""

import copy
import os
import re
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, Optional, Tuple

from horovod_flyte_runtime.quiet_store import QuietStore
from horovod_flyte_runtime.settings import HorovodConfigError, whole_number
from horovod_flyte_runtime.spark_context import current_horovod_spark, spark_checkpoint_url

FOLDER = "torch-estimator"  # under the task's Flyte checkpoint
_EPOCH_FILE = re.compile(r"epoch-(\d+)\.pt")


class PublishingStore(QuietStore):
    """A ``QuietStore`` whose sync, which TorchEstimator's rank 0 calls once after each epoch's checkpoint, also copies
    the checkpoint file to ``checkpoint_url`` (a local folder or fsspec URL) named after the epochs finished."""

    def __init__(self, prefix_path: str, checkpoint_url: Optional[str], epochs_done: int = 0):
        super().__init__(prefix_path)
        self.checkpoint_url, self.epochs_done = checkpoint_url, epochs_done

    def sync_fn(self, run_id: str) -> Callable[[str], None]:
        sync = super().sync_fn(run_id)
        if self.checkpoint_url is None:
            return sync
        url, filename, done = self.checkpoint_url, self.get_checkpoint_filename(), [self.epochs_done]

        def sync_and_publish(local_run_path: str) -> None:
            sync(local_run_path)
            done[0] += 1
            publish(os.path.join(local_run_path, filename), url, done[0])

        return sync_and_publish


def publish(checkpoint_file: str, url: str, epochs_done: int) -> None:
    """Copy ``checkpoint_file`` to ``<url>/epoch-<epochs_done>.pt`` (under a temporary name, then renamed) and remove
    the older epochs' files."""
    import fsspec

    fs, root = fsspec.core.url_to_fs(url)
    root = root.rstrip("/")
    fs.makedirs(root, exist_ok=True)
    tmp = f"{root}/.epoch-{epochs_done}.{uuid.uuid4().hex[:8]}.tmp"
    fs.put_file(checkpoint_file, tmp)
    fs.mv(tmp, f"{root}/epoch-{epochs_done}.pt")
    for path in fs.ls(root, detail=False):
        match = _EPOCH_FILE.fullmatch(path.rsplit("/", 1)[-1])
        if match and int(match.group(1)) < epochs_done:
            fs.rm(path)


def newest_checkpoint(folder: Path) -> Optional[Tuple[int, Path]]:
    """The published checkpoint in ``folder`` with the most epochs finished: (epochs, file), or None."""
    found = [(int(m.group(1)), p) for p in folder.glob("epoch-*.pt") if (m := _EPOCH_FILE.fullmatch(p.name))]
    return max(found) if found else None


@dataclass
class TorchResume:
    """What to pass to ``TorchEstimator``: ``store=``, ``run_id=`` and ``epochs=epochs_left``.

    ``epochs_done``: epochs previous attempts finished; ``state``: the newest of their checkpoints as published
    (``{"model": ..., "optimizer": ...}`` state dicts), the trained model when ``epochs_left`` is 0."""

    store: PublishingStore
    run_id: str
    epochs_done: int
    epochs_left: int
    state: Optional[Dict[str, Any]] = None


def spark_torch_resume(epochs: int, name: str = "store", num_proc: Optional[int] = None) -> TorchResume:
    """Inside a HorovodSpark task: a store for ``TorchEstimator`` whose rank 0 copies every epoch's checkpoint to the
    task's Flyte checkpoint, and on a retry the previous attempt's newest checkpoint ready for ``fit`` (see module doc).

    ``epochs``: the whole training's; ``num_proc``: the Estimator's ranks (default the task's ``num_proc``).
    """
    import flytekit
    import torch

    if not whole_number(epochs, at_least=1):
        raise HorovodConfigError(f"spark_torch_resume(epochs={epochs!r}): needs a whole number of epochs, at least 1")
    horovod = current_horovod_spark()
    url = spark_checkpoint_url()
    store = PublishingStore(f"{horovod.store_prefix}/{name}", None if url is None else f"{url.rstrip('/')}/{FOLDER}")
    run_id = f"flyte_{uuid.uuid4().hex[:12]}"  # a new run: fit loads nothing but what is put below
    previous = None
    if url is not None:
        params = flytekit.current_context()
        restored = params.checkpoint.restore(tempfile.mkdtemp(prefix="resume-", dir=str(params.working_directory)))
        previous = newest_checkpoint(Path(restored) / FOLDER) if restored else None
    if previous is None:
        return TorchResume(store, run_id, 0, epochs)
    done, path = previous
    state = torch.load(path)
    _put_for_fit(store, run_id, state, num_proc or horovod.num_proc)
    store.epochs_done = min(done, epochs)
    return TorchResume(store, run_id, store.epochs_done, epochs - store.epochs_done, state)


def _put_for_fit(store: PublishingStore, run_id: str, state: Dict[str, Any], ranks: int) -> None:
    """Write ``state`` where ``fit`` loads the checkpoint of ``run_id``, with the learning rate multiplied by the ranks
    (``fit`` scales only a fresh start's rate)."""
    import torch

    resumed = copy.deepcopy(state)
    for group in resumed["optimizer"]["param_groups"]:
        group["lr"] *= ranks
    folder = store.get_localized_path(store.get_checkpoint_path(run_id))
    store.fs.makedirs(folder, exist_ok=True)
    with store.fs.open(f"{folder}/{store.get_checkpoint_filename()}", "wb") as f:
        torch.save(resumed, f)
