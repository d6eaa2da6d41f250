"""What the Keras and the PyTorch training share epoch by epoch, framework-free: the monitored metric, the learning
rate's warm-up and half-cosine decay, and rank 0's line per epoch."""
from __future__ import annotations

import math
from dataclasses import dataclass

from rossmann.hyperparameters import WARMUP_EPOCHS

MONITOR = "val_exp_rmspe"  # the saved model is the epoch where this was lowest


def half_cosine(epoch: float, epochs: int, warmup: int = WARMUP_EPOCHS) -> float:
    """The learning-rate multiplier of an epoch (0-based): down along a half cosine over all ``epochs``, and during the
    first ``warmup`` epochs up in equal steps to it ((epoch + 1) / (warmup + 1)): the warm-up Horovod recommends
    (Goyal et al.) when the rate is scaled with the ranks and the batch."""
    warm = min(1.0, (epoch + 1.0) / (warmup + 1.0))
    return warm * 0.5 * (1.0 + math.cos(math.pi * epoch / epochs))


@dataclass(frozen=True)
class HalfCosine:
    """``half_cosine`` as a picklable callable (for Horovod's LearningRateScheduleCallback on the Estimator's
    workers), for a fit that Keras numbers from 0 although it goes on after ``first_epoch`` epochs."""

    epochs: int
    first_epoch: int = 0

    def __call__(self, epoch: float) -> float:
        return half_cosine(self.first_epoch + epoch, self.epochs)


def epoch_line(epoch: int, epochs: int, loss: float, backtest_rmspe: float, seconds: float) -> str:
    """Rank 0's line after an epoch (1-based): every rank's average loss, the backtest RMSPE and the seconds."""
    return (f"rank 0: epoch {epoch}/{epochs}: loss {loss:.4f}, backtest RMSPE {backtest_rmspe:.4f}, "
            f"{seconds:.1f} s")
