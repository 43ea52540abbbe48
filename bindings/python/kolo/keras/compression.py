"""Gradient compression for kolo.keras, on any backend's tensors (keras.ops),
with horovod's names."""
import keras


class Compressor:
    @staticmethod
    def compress(tensor):
        raise NotImplementedError

    @staticmethod
    def decompress(tensor, ctx):
        raise NotImplementedError


class NoneCompressor(Compressor):
    @staticmethod
    def compress(tensor):
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tensor


class FP16Compressor(Compressor):
    """Floating-point tensors travel as float16; kolo reduces them in float32."""

    @staticmethod
    def compress(tensor):
        dtype = keras.backend.standardize_dtype(tensor.dtype)
        if "float" in dtype and dtype != "float16":
            return keras.ops.cast(tensor, "float16"), dtype
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return keras.ops.cast(tensor, ctx) if ctx is not None else tensor


class Compression:
    none = NoneCompressor
    fp16 = FP16Compressor
