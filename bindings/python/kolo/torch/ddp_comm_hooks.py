"""DDP communication hooks that send gradients in kolo's wire formats
(docs/compression.md), for a DistributedDataParallel model whose process
group is kolo's (backend="kolo"):

    from kolo.torch import ddp_comm_hooks
    model.register_comm_hook(ddp_comm_hooks.WireState(wire="int8", error_feedback=True),
                             ddp_comm_hooks.wire_hook)

Each bucket is averaged in the format, summed in float32 at every hop and
bitwise the same on every rank, unlike torch's fp16/bf16 compress hooks,
which cast the bucket and sum in the narrow type. With error feedback the
state keeps one float32 per gradient element (per bucket), adds it into the
bucket's next allreduce and stores what that one lost: WireState.residual_bytes
says how much that is. Buckets of other dtypes are averaged as they are."""
import torch
import torch.distributed as dist


class WireState:
    """What wire_hook sends: `wire` ("bf16", "fp16", "fp8_e4m3", "fp8_e5m2"
    or "int8") over `process_group` (None: the default group), with error
    feedback or not."""

    def __init__(self, process_group=None, wire="bf16", error_feedback=False):
        from kolo._compression import WIRE_FORMATS
        if wire not in WIRE_FORMATS:
            raise ValueError("unknown wire format %r: use %s" % (wire, ", ".join(sorted(WIRE_FORMATS))))
        self.process_group = process_group
        self.wire = wire
        self.error_feedback = error_feedback
        self.residuals = {}  # bucket index -> float32 tensor

    @property
    def residual_bytes(self):
        return sum(r.numel() * r.element_size() for r in self.residuals.values())

    def residual_for(self, bucket):
        buffer = bucket.buffer()
        kept = self.residuals.get(bucket.index())
        if kept is None or kept.numel() != buffer.numel():
            kept = torch.zeros(buffer.numel(), dtype=torch.float32)
            self.residuals[bucket.index()] = kept
        return kept


def _kolo_group(process_group):
    """kolo's process group object: the group itself (torch keeps the group
    a backend's creator returns), or the one behind its CPU backend."""
    group = process_group or dist.group.WORLD
    if hasattr(group, "allreduce_wire"):
        return group
    inner = getattr(group._get_backend(torch.device("cpu")), "_group", None)
    if not hasattr(inner, "allreduce_wire"):
        raise RuntimeError("kolo.torch.ddp_comm_hooks needs a process group of backend 'kolo', not %s"
                           % dist.get_backend(group))
    return inner


def wire_hook(state, bucket):
    """Averages the bucket in state.wire (see WireState)."""
    buffer = bucket.buffer()
    if buffer.dtype not in (torch.float32, torch.float16, torch.bfloat16) or buffer.device.type != "cpu":
        group = state.process_group or dist.group.WORLD
        return dist.all_reduce(buffer, op=dist.ReduceOp.AVG, group=group, async_op=True).get_future().then(
            lambda f: f.value()[0])
    residuals = state.residual_for(bucket) if state.error_feedback else None
    work = _kolo_group(state.process_group).allreduce_wire(buffer, state.wire, dist.ReduceOp.AVG, residuals)
    return work.get_future().then(lambda f: f.value()[0])
