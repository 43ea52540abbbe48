"""horovod.tensorflow is kolo.tensorflow: this module replaces itself with
it, and Horovod's submodule names (mpi_ops, keras, util...) with kolo's, so
nothing of kolo's is imported twice."""
import sys

from horovod import alias_package

alias_package(__name__, "kolo.tensorflow", ["kolo.tensorflow.keras", "kolo.tensorflow.keras.callbacks"])
