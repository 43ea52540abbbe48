"""A Keras elastic job (kolo.tensorflow.keras's Horovod API) for
test_elastic_tensorflow.py, under kolorun's elastic driver: model.fit
keeps a KerasState current through Horovod's elastic callbacks.

ELASTIC_FAIL=WORKER:EPOCH:BATCH makes that worker (KOLO_ELASTIC_WORKER)
raise at that batch, on its first start. Each worker ends printing
"worker W: rank R of N done: epochs E, parameters HASH"."""
import hashlib
import os

import keras
import numpy as np
import tensorflow as tf

import kolo.tensorflow.keras as hvd

EPOCHS, STEPS, LR = 3, 8, 0.01
hvd.init()
worker = os.environ.get("KOLO_ELASTIC_WORKER", "")
first_start = os.environ.get("KOLO_ELASTIC_RESTARTS", "0") == "0"
fail = os.environ.get("ELASTIC_FAIL", "").rsplit(":", 2)

keras.utils.set_random_seed(1)
model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, activation="relu"), keras.layers.Dense(1)])
model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(LR * hvd.size(), momentum=0.9)), loss="mse")
x = np.random.default_rng(0).normal(size=(256, 4)).astype("float32")
data = tf.data.Dataset.from_tensor_slices((x, x.sum(axis=1, keepdims=True))).repeat().batch(16)
state = hvd.elastic.KerasState(model, batch=0, epoch=0)


def on_reset():
    model.optimizer.learning_rate.assign(LR * hvd.size())


state.register_reset_callbacks([on_reset])


class Fault(keras.callbacks.Callback):
    def on_train_batch_begin(self, batch, logs=None):
        if first_start and len(fail) == 3 and fail[0] == worker and (state.epoch, batch) == (int(fail[1]),
                                                                                           int(fail[2])):
            print("worker %s fails at epoch %d batch %d" % (worker, state.epoch, batch), flush=True)
            raise RuntimeError("the test's fault")


@hvd.elastic.run
def train(state):
    state.model.fit(data, steps_per_epoch=STEPS, epochs=EPOCHS - state.epoch, verbose=0,
                    callbacks=[Fault(), hvd.elastic.CommitStateCallback(state),
                               hvd.elastic.UpdateBatchStateCallback(state), hvd.elastic.UpdateEpochStateCallback(state)])


train(state)
digest = hashlib.sha256(b"".join(np.asarray(w).tobytes() for w in model.get_weights())).hexdigest()[:16]
print("worker %s: rank %d of %d done: epochs %d, parameters %s" % (worker, hvd.rank(), hvd.size(), state.epoch,
                                                                     digest), flush=True)
