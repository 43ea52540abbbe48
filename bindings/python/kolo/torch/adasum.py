"""Adasum (op=hvd.Adasum), Horovod's adaptive summation, for host and CUDA
tensors: an allgather of the ranks' tensors, then kolo._adasum's tree (the
same as for NumPy arrays; its docstring says how) on every rank."""
import torch

from kolo import _adasum
from kolo import _collectives as C
from kolo import _runtime
from kolo.torch._adapter import adapter as _tx


def allreduce_async(tensor, inplace, name, prescale_factor, postscale_factor, group):
    """Adasum of the group's tensors (floating dtypes); a handle whose
    result is a new tensor, or tensor itself written when inplace."""
    _adasum.check(_tx.describe(tensor).dtype, prescale_factor, postscale_factor, group)
    flat = tensor.detach().reshape(1, -1)
    if prescale_factor != 1.0:
        flat = flat * prescale_factor
    name = group.operation_name("adasum", name).decode()
    gathered = C.allgather_async(_tx, flat.contiguous(), name, group)

    def finish(outputs):
        rows = outputs[0].to(device="cpu", dtype=torch.float64).numpy()
        result = torch.from_numpy(_adasum.tree(rows) * postscale_factor)
        result = result.reshape(tensor.shape).to(dtype=tensor.dtype, device=tensor.device)
        if inplace:
            with torch.no_grad():
                tensor.copy_(result)
            return tensor
        return result

    return _runtime.Combined([gathered], finish)
