"""horovod.tensorflow.keras.callbacks: kolo.keras's."""
from kolo.keras.callbacks import *  # noqa: F401,F403
from kolo.keras.callbacks import (BestModelCheckpoint, BroadcastGlobalVariablesCallback,  # noqa: F401
                                  LearningRateScheduleCallback, LearningRateWarmupCallback, MetricAverageCallback)
