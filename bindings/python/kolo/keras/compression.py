"""Gradient compression for kolo.keras, on any Keras backend's tensors
(keras.ops), with Horovod's names."""
import keras

from kolo._compression import Compressor, NoneCompressor, compression  # noqa: F401 (re-exported)


def _to_float16(tensor):
    dtype = keras.backend.standardize_dtype(tensor.dtype)
    if "float" in dtype and dtype != "float16":
        return keras.ops.cast(tensor, "float16"), dtype
    return tensor, None


Compression = compression(_to_float16, keras.ops.cast)
FP16Compressor = Compression.fp16
