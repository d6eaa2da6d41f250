"""Horovod's local and fsspec Store, without the line it prints after every epoch."""

from horovod.spark.common.store import FilesystemStore


class QuietStore(FilesystemStore):
    """``FilesystemStore`` whose per-epoch sync of the run folder does not print "Syncing dir ... to dir ..."."""

    def sync_fn(self, run_id):
        run_path = self.get_run_path(run_id)
        return lambda local_run_path: self.copy(local_run_path, run_path, recursive=True, overwrite=True)
