"""One rank of a kolo.tensorflow job started rank by rank (by
test_tensorflow_failures.py): `tensorflow_job.py RANK SIZE PORT SCENARIO`.
Prints "rank R: ok" or "rank R: <ErrorClass> after <seconds> s: <message>"."""
import os
import sys
import time

rank, size, port, scenario = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
os.environ.update(KOLO_RANK=str(rank), KOLO_WORLD_SIZE=str(size), KOLO_MASTER_ADDR="127.0.0.1",
                  KOLO_MASTER_PORT=port)
import tensorflow as tf  # noqa: E402

import kolo.tensorflow as hvd  # noqa: E402

hvd.init()
step = tf.function(lambda x: hvd.allreduce(x, op=hvd.Sum))
step(tf.ones([4]))  # every rank is up and the engine connected
started = time.monotonic()
try:
    if scenario == "death" and rank == size - 1:
        os._exit(3)
    if scenario == "stall" and rank == size - 1:
        time.sleep(6)  # never submits the others' next allreduce in time
        hvd.allreduce(tf.ones([4]), name="after_stall")
    else:
        for _ in range(3):
            step(tf.ones([1 << 16]))
    print("rank %d: ok" % rank, flush=True)
except tf.errors.OpError as e:
    print("rank %d: %s after %.2f s: %s" % (rank, type(e).__name__, time.monotonic() - started,
                                            e.message.replace("\n", " ")), flush=True)
    time.sleep(2)  # as a job reporting its failure would: each survivor learns of the loss itself
hvd.shutdown()
