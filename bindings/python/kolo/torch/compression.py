"""Gradient compression for allreduce, as horovod.torch's."""
import torch

from kolo._compression import Compressor, NoneCompressor, compression  # noqa: F401 (re-exported)


def _to_float16(tensor):
    if tensor.dtype.is_floating_point and tensor.dtype != torch.float16:
        return tensor.to(torch.float16), tensor.dtype
    return tensor, None


Compression = compression(_to_float16, lambda tensor, dtype: tensor.to(dtype))
FP16Compressor = Compression.fp16
