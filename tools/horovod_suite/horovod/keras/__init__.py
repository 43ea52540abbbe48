"""horovod.keras is kolo.keras (Keras 3: one Keras for every backend)."""
from horovod import alias_package

alias_package(__name__, "kolo.keras", ["kolo.keras.callbacks"])
