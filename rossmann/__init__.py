"""Rossmann store-sales forecasting: data, Spark features, the Keras and PyTorch models, metrics, prediction.

Its Keras model is a Keras 2 model (Horovod's Keras API needs Keras 2). On TensorFlow >= 2.16 ``tf.keras`` is Keras 3
unless ``TF_USE_LEGACY_KERAS=1`` is set before TensorFlow is imported, so where tf-keras is installed and the variable
is unset, importing this package sets it, as importing the plugin does (a script or test that imports ``rossmann``
before the plugin failed at import: ``keras._tf_keras.keras`` has no ``saving``)."""

import importlib.util
import os

if "TF_USE_LEGACY_KERAS" not in os.environ and importlib.util.find_spec("tf_keras") is not None:
    os.environ["TF_USE_LEGACY_KERAS"] = "1"
