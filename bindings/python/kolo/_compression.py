"""Horovod's gradient compression, written once: Compression.none and
Compression.fp16, each a class with static compress(tensor) -> (tensor to
send, context) and decompress(tensor, context). A front end supplies only
how its tensors become float16 and back."""


class Compressor:
    """compress(tensor) -> (tensor to send, context); decompress undoes it."""

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


def compression(to_float16, back):
    """A Compression class whose fp16 sends floating-point tensors as
    float16 (half the bytes of float32; kolo reduces float16 in float32 and
    rounds once): to_float16(tensor) -> (float16 tensor, context) or
    (tensor, None) to leave it as it is; back(tensor, context)."""

    class FP16Compressor(Compressor):
        @staticmethod
        def compress(tensor):
            return to_float16(tensor)

        @staticmethod
        def decompress(tensor, ctx):
            return back(tensor, ctx) if ctx is not None else tensor

    class Compression:
        none = NoneCompressor
        fp16 = FP16Compressor

    return Compression
