"""horovod.tensorflow is kolo.tensorflow: this module replaces itself with
it, and Horovod's submodule names (mpi_ops, keras, util...) with kolo's, so
nothing of kolo's is imported twice."""
import os

from horovod import alias_package

if os.environ.get("HOROVOD_SUITE_KERAS2_LR") == "1":
    # Horovod's elastic TensorFlow scripts set the learning rate through
    # optimizer.lr, Keras 2's name; Keras 3 has only learning_rate. Asked
    # for (HOROVOD_SUITE_KERAS2_LR=1), the harness gives
    # Keras 3's optimizers that name too, so that those scripts run at all.
    import keras
    if not hasattr(keras.optimizers.Optimizer, "lr"):
        keras.optimizers.Optimizer.lr = property(lambda self: self.learning_rate)

alias_package(__name__, "kolo.tensorflow", ["kolo.tensorflow.keras", "kolo.tensorflow.keras.callbacks"])
