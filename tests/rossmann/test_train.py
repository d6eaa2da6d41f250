"""Both training routes: 2 real Horovod ranks (Gloo), and the KerasEstimator on Spark local[2]."""
import hashlib
import json
import math

import numpy as np
import pytest

from rossmann.checkpoint import read_checkpoint, read_state, resume
from rossmann.metrics import rmspe
from rossmann.model import build_model
from rossmann.predict import load_model, predict_log_sales
from rossmann.prepared import continuous_stats, feature_cols, load_metadata, read_split
from tests.rossmann._fixtures import BROKEN_STATE, check_broken_checkpoint_is_skipped

SMALL = dict(hidden=(64, 32), dropout=0.1, batch_size=64, learning_rate=3e-3)


@pytest.fixture(scope="module")
def untrained_rmspe(prepared):
    """Validation RMSPE of a model before training, the bar that training must clear."""
    metadata = load_metadata(prepared)
    val = read_split(prepared / "val", feature_cols(metadata) + ["Sales_log"])
    model = build_model(metadata, continuous_stats(prepared, metadata), hidden=SMALL["hidden"])
    return rmspe(np.exp(val["Sales_log"]), np.exp(predict_log_sales(model, val, metadata)))


def check_model_dir(out, prepared, ranks, epochs, untrained_rmspe):
    assert (out / "model" / "saved_model.pb").is_file()
    history = json.loads((out / "history.json").read_text())
    metrics = json.loads((out / "metrics.json").read_text())
    assert {"loss", "exp_rmspe", "val_loss", "val_exp_rmspe"} <= set(history)
    assert all(len(values) == epochs for values in history.values())
    assert metrics["best_val_exp_rmspe"] == min(history["val_exp_rmspe"])
    assert metrics["epochs"] == epochs and metrics["ranks"] == ranks
    assert metrics["train_rows"] == 4800 and metrics["backtest_rows"] == 560 and metrics["seconds"] > 0
    assert metrics["backtest_rmspe"] < 0.5 * untrained_rmspe
    assert not [p.name for p in out.iterdir() if p.name.startswith(".")]  # no temporary leftovers

    metadata = load_metadata(prepared)
    val = read_split(prepared / "val", feature_cols(metadata) + ["Sales_log"])
    model = load_model(out)
    reloaded = rmspe(np.exp(val["Sales_log"]), np.exp(predict_log_sales(model, val, metadata)))
    assert reloaded == pytest.approx(metrics["backtest_rmspe"], rel=1e-4)
    return history, metrics


def run_two_ranks(prepared, out, **kwargs):
    """train_rank on 2 real Horovod ranks (Gloo); per rank: (history, sha256 of the final weights)."""
    import horovod.runner

    def rank_fn():
        import tensorflow as tf

        from rossmann.train import train_rank

        digests = []

        class WeightsDigest(tf.keras.callbacks.Callback):
            def on_train_end(self, logs=None):
                digest = hashlib.sha256()
                for w in self.model.get_weights():
                    digest.update(w.tobytes())
                digests.append(digest.hexdigest())

        history = train_rank(prepared, out, seed=1, callbacks=[WeightsDigest()], **SMALL, **kwargs)
        return history, digests[0]

    return horovod.runner.run(rank_fn, num_proc=2, hosts="localhost:2", use_gloo=True)


@pytest.fixture(scope="module")
def two_rank_run(prepared, tmp_path_factory):
    work = tmp_path_factory.mktemp("ranks")
    # 3 epochs: the learning rate warms up over the first 2, and after those 2 alone the backtest was 0.377 against
    # the bound's 0.355 in one of two runs on the 2026 stack (tf-keras 2.21; 2 epochs sufficed on TF 2.15)
    results = run_two_ranks(prepared, work / "trained", epochs=3, checkpoint_dir=work / "checkpoint")
    return work, results


def test_train_rank_on_two_gloo_ranks(prepared, two_rank_run, untrained_rmspe):
    work, results = two_rank_run
    (history0, digest0), (history1, digest1) = results
    assert digest0 == digest1  # the same weights on both ranks after training
    assert history0 == history1
    history, metrics = check_model_dir(work / "trained", prepared, ranks=2, epochs=3, untrained_rmspe=untrained_rmspe)
    assert history == history0
    assert metrics["route"] == "horovod-ranks"
    assert history["val_exp_rmspe"][-1] < history["val_exp_rmspe"][0]


def test_train_rank_resumes_from_its_checkpoint(prepared, two_rank_run, tmp_path):
    work, [(first, _), _] = two_rank_run
    state = read_state(work / "checkpoint")
    assert state.epochs_done == 3 and state.history == first
    assert state.best == min(first["val_exp_rmspe"])

    results = run_two_ranks(prepared, tmp_path / "trained", epochs=4, checkpoint_dir=work / "checkpoint")
    history = results[0][0]
    assert all(len(values) == 4 for values in history.values())
    assert {k: v[:3] for k, v in history.items()} == first  # epochs 1-3 from the checkpoint, epoch 4 trained
    assert read_state(work / "checkpoint").epochs_done == 4
    metrics = json.loads((tmp_path / "trained" / "metrics.json").read_text())
    assert metrics["epochs"] == 4 and metrics["best_val_exp_rmspe"] == min(history["val_exp_rmspe"])
    # the saved model is the best epoch, even when that epoch came from before the restart (scored before the
    # RMSPE calibration, the output the epochs were scored on)
    import tensorflow as tf

    saved = load_model(tmp_path / "trained")
    epoch_model = tf.keras.Model(saved.inputs, saved.get_layer("rmspe_calibration").input)
    metadata = load_metadata(prepared)
    val = read_split(prepared / "val", feature_cols(metadata) + ["Sales_log"])
    best = rmspe(np.exp(val["Sales_log"]), np.exp(predict_log_sales(epoch_model, val, metadata)))
    assert best == pytest.approx(metrics["best_val_exp_rmspe"], rel=0.05)
    assert metrics["backtest_rmspe"] <= 1.01 * best  # calibrated on training rows, no worse on the backtest


@pytest.mark.parametrize("file, how, problem", [("last.data-*", "truncated", "IndexError"),
                                                ("last.index", "truncated", ""),
                                                ("best.npz", "truncated", "BadZipFile"), BROKEN_STATE])
def test_a_checkpoint_that_cannot_be_read_is_skipped_with_a_warning(two_rank_run, tmp_path, caplog, file, how,
                                                                    problem):
    check_broken_checkpoint_is_skipped(two_rank_run[0] / "checkpoint", tmp_path / "checkpoint", file, how, problem,
                                       lambda folder: resume(folder, read_checkpoint), caplog)


def test_fit_estimator_on_spark(spark, prepared, tmp_path, untrained_rmspe):
    from horovod.spark.common.backend import SparkBackend
    from horovod.spark.common.store import Store

    from rossmann.train import fit_estimator

    out = tmp_path / "trained"
    backend = SparkBackend(num_proc=2, start_timeout=300, use_gloo=True)
    store = Store.create(str(tmp_path / "store"))
    model, history = fit_estimator(prepared, backend, store, epochs=3, seed=1, out_dir=out, **SMALL)
    assert model.input_names == feature_cols(load_metadata(prepared))
    saved_history, metrics = check_model_dir(out, prepared, ranks=2, epochs=3, untrained_rmspe=untrained_rmspe)
    assert saved_history == history
    assert metrics["route"] == "spark-estimator"
    assert math.isfinite(metrics["best_val_exp_rmspe"])


def test_the_estimators_copy_of_the_splits_is_theirs_and_removed_after(prepared, tmp_path):
    """The Estimator trains on the prepared Parquet copied into its store, and the copy goes when training ends."""
    from horovod.spark.common.store import Store

    from rossmann.estimator_data import splits_in_store
    from rossmann.prepared import count_rows, parquet_files

    store = Store.create(str(tmp_path / "store"))
    with splits_in_store(prepared, store) as dataset:
        copies = [store.get_localized_path(store.get_train_data_path(dataset)),
                  store.get_localized_path(store.get_val_data_path(dataset))]
        assert [count_rows(c) for c in copies] == [count_rows(prepared / s) for s in ("train", "val")]
    assert not any(store.fs.exists(c) for c in copies)
    assert not list((tmp_path / "store").rglob("*.parquet")), parquet_files(tmp_path / "store")


def test_the_estimators_model_is_saved_as_hdf5_whatever_its_file_name(prepared, tmp_path, recwarn):
    """Horovod names the Estimator's checkpoint ``checkpoint`` (no .h5), loads it and ships it as HDF5: the callback
    saves HDF5 there (a SavedModel took 2.2 s to save and load against 0.2 s), and the model loads back the same."""
    import h5py
    import tensorflow as tf

    from rossmann.keras_callbacks import SaveWhenTrainingEnds
    from rossmann.model import CUSTOM_OBJECTS, compile_model, make_optimizer

    metadata = load_metadata(prepared)
    model = compile_model(build_model(metadata, continuous_stats(prepared, metadata), [8], 0.1), make_optimizer(1e-3))
    callback = SaveWhenTrainingEnds(str(tmp_path / "checkpoint"))
    callback.set_model(model)
    callback.on_train_end()
    assert h5py.is_hdf5(tmp_path / "checkpoint")
    assert not [w for w in recwarn if "HDF5" in str(w.message)]  # Keras's "legacy format" notice is not shown
    with tf.keras.utils.custom_object_scope(CUSTOM_OBJECTS):
        loaded = tf.keras.models.load_model(str(tmp_path / "checkpoint"))
    for saved, back in zip(model.get_weights(), loaded.get_weights()):
        np.testing.assert_array_equal(saved, back)
