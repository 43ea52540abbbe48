"""horovod.tensorflow.keras's API: with Keras 3, tf.keras and keras are one
package, so this is kolo.keras (which also runs on Keras's torch backend)."""
from kolo.keras import *  # noqa: F401,F403
from kolo.keras import (DistributedOptimizer, HorovodInternalError, PartialDistributedOptimizer,  # noqa: F401
                        SyncBatchNormalization,
                        allgather, allreduce, broadcast, broadcast_global_variables, broadcast_variables, callbacks,
                        load_model, reducescatter)


def __getattr__(name):
    """hvd.elastic, imported when first used: it needs Keras's tensorflow
    backend, which a Keras on its torch backend does not load."""
    if name == "elastic":
        import importlib
        return importlib.import_module("kolo.keras.elastic")
    raise AttributeError("module %r has no attribute %r" % (__name__, name))
