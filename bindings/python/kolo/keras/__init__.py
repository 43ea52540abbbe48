"""kolo for Keras, with horovod.keras's (and horovod.tensorflow.keras's) API,
for the Keras the process's tf.keras is (kolo/_keras_flavour.py): Keras 3
by default (kolo/keras/_api.py, on Keras's tensorflow and torch backends),
Keras 2 where TF_USE_LEGACY_KERAS makes tf.keras tf_keras (kolo/_tf_keras),
with the same names either way:

    import kolo.keras as hvd
    hvd.init()
    opt = hvd.DistributedOptimizer(keras.optimizers.Adam(0.001 * hvd.size()))
    model.compile(optimizer=opt, loss=...)
    model.fit(x, y, callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0),
                               hvd.callbacks.MetricAverageCallback()],
              verbose=1 if hvd.rank() == 0 else 0)

kolo.tensorflow.keras is this module; hvd.elastic is Horovod's keras
elastic API (kolo.keras.elastic).
"""
from kolo._keras_flavour import tf_keras_in_use as _tf_keras_in_use

if _tf_keras_in_use():
    from kolo._tf_keras import *  # noqa: F401,F403
else:
    from kolo.keras._api import *  # noqa: F401,F403


def __getattr__(name):
    """hvd.elastic, imported when first used: with Keras 3 it needs Keras's
    tensorflow backend, which a Keras on its torch backend does not load."""
    if name == "elastic":
        import importlib
        return importlib.import_module("kolo.keras.elastic")
    raise AttributeError("module %r has no attribute %r" % (__name__, name))
