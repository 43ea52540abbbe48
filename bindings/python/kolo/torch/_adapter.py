"""CPU and CUDA tensors for the collectives (CUDA ones on the GPU, or
through host copies on PyTorch's current stream; see kolo._collectives)."""
import torch

from kolo import _collectives as C


def dtype_name(dtype):
    """A torch dtype's name as NumPy and kolo._policy spell it ("int16",
    "bool", "bfloat16", "complex64"): torch's own, less its module."""
    return str(dtype).rpartition(".")[2]


class _DeviceBytes:
    """nbytes of GPU memory at `address`, as CUDA's array interface shows
    them to torch.as_tensor."""

    def __init__(self, address, nbytes):
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "data": (address, True),
                                         "version": 2}


class TorchAdapter(C.Adapter):
    def describe(self, t):
        if not isinstance(t, torch.Tensor):
            raise TypeError("kolo.torch collectives take torch tensors, not %s" % type(t).__name__)
        if t.device.type not in ("cpu", "cuda"):
            raise TypeError("kolo.torch handles CPU and CUDA tensors; this one is on %s" % t.device)
        # A lazily conjugated or negated view's memory is not its value: stage it like a strided one.
        dense = t.is_contiguous() and not t.is_conj() and not t.is_neg()
        return C.ArrayInfo(t.data_ptr(), tuple(t.shape), dtype_name(t.dtype), t.element_size(), dense)

    def empty(self, shape, like, dtype=None):
        return torch.empty(shape, dtype=getattr(torch, dtype) if dtype else like.dtype, device=like.device)

    def assign(self, dst, src):
        # Into a CUDA tensor: enqueued on the current stream, in order with the caller's work.
        with torch.no_grad():
            dst.copy_(src)

    def on_device(self, x):
        return x.device.type == "cuda"

    def to_host(self, x):
        # On the current stream, after the work that produced x; returns once copied.
        with torch.no_grad():
            return x.detach().to("cpu", copy=True).contiguous()

    def copy_from_device_memory(self, out, address, nbytes):
        # The engine's memory seen as a tensor (CUDA's array interface, no
        # copy), copied on the current stream; the host waits for that copy,
        # since the memory goes with the handle once this returns.
        source = torch.as_tensor(_DeviceBytes(address, nbytes), device=out.device)
        with torch.no_grad():
            out.view(-1).view(torch.uint8).copy_(source)
        torch.cuda.current_stream(out.device).synchronize()

    def order_before_engine(self, x):
        # torch's default stream is CUDA's legacy default stream (handle 0).
        current = torch.cuda.current_stream(x.device)
        default = torch.cuda.default_stream(x.device)
        if current != default:
            default.wait_stream(current)


adapter = TorchAdapter()
