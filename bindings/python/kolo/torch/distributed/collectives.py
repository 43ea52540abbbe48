"""torch's collectives and point-to-point calls on a kolo group, each as
kolo's call (over the group's _run, _post_batch and _lock,
process_group.py): a mixin of KoloProcessGroup, the group's torch-facing
half, apart from how an operation is submitted."""
import ctypes
import datetime
import math
import time

import torch
import torch.distributed as dist

from kolo._library import KoloTimeoutError
from kolo.torch._eager import run_eagerly
from kolo.torch.distributed.coalescing import Coalesced
from kolo.torch.distributed.tensors import (BYTES, Buffer, Reduction, check_rank, concatenated, offsets, op_of, pack,
                                            same_dtype, same_layout, single, size_array, unpack)


@run_eagerly
class Collectives:
    def allreduce(self, tensors, opts=None):
        tensor = single(tensors, "allreduce")
        if tensor.is_sparse:
            return self._sparse_allreduce(tensor, op_of(opts))
        r = Reduction(tensor.dtype, op_of(opts), "allreduce")
        b = Buffer(tensor, reduction=r)
        return self._run("allreduce", (b.address, b.address, b.count, r.dtype, r.op), [b], tensors, [b])

    def allreduce_wire(self, tensor, wire, op=dist.ReduceOp.AVG, residuals=None):
        """kolo's addition: allreduce of a contiguous CPU float32, float16
        or bfloat16 tensor (SUM or AVG) in wire format `wire` (a
        kolo.torch.Compression.WIRE_FORMATS name), in place, in this
        group's call order (kolo_allreduce_wire_async). residuals: None, or
        a float32 tensor of as many elements that keeps error feedback's
        state between calls over the same buffer. kolo.torch.ddp_comm_hooks
        uses it."""
        from kolo._compression import WIRE_FORMATS
        if wire not in WIRE_FORMATS:
            raise ValueError("unknown wire format %r: use %s" % (wire, ", ".join(sorted(WIRE_FORMATS))))
        if tensor.device.type != "cpu" or not tensor.is_contiguous():
            raise RuntimeError("kolo: allreduce_wire takes a contiguous CPU tensor")
        r = Reduction(tensor.dtype, op, "allreduce")
        b = Buffer(tensor, reduction=r)
        if residuals is not None and (residuals.dtype != torch.float32 or residuals.numel() != b.count
                                      or not residuals.is_contiguous()):
            raise RuntimeError("kolo: residuals must be a contiguous float32 tensor of %d elements" % b.count)
        kept = residuals.data_ptr() if residuals is not None else None
        keep = [b] + ([residuals] if residuals is not None else [])
        return self._run("allreduce_wire", (b.address, b.address, b.count, r.dtype, r.op, WIRE_FORMATS[wire], kept),
                         keep, [tensor], [b])

    def _sparse_allreduce(self, tensor, op):
        """A sparse COO tensor's sum (as gloo's): every rank's indices and
        values are gathered (their counts first, which the call waits
        for), then added up, coalesced, into the tensor."""
        if op != dist.ReduceOp.SUM:
            raise RuntimeError("kolo: sparse tensors reduce with ReduceOp.SUM only, not %s" % op)
        if tensor.device.type != "cpu":
            raise RuntimeError("kolo: sparse tensors must be on the CPU")
        mine = tensor.coalesce()
        indices = mine.indices().t().contiguous()  # nnz rows of sparse_dim
        values = mine.values().contiguous()
        counts = torch.empty(self.size(), dtype=torch.int64)
        mine_count = torch.tensor([indices.shape[0]], dtype=torch.int64)
        self._run("allgather", (mine_count.data_ptr(), counts.data_ptr(), 8, BYTES), [mine_count, counts]).wait()
        rows = counts.tolist()
        all_indices = torch.empty(sum(rows), indices.shape[1], dtype=indices.dtype)
        all_values = torch.empty((sum(rows),) + tuple(values.shape[1:]), dtype=values.dtype)

        def gather(local, gathered):
            row_bytes = local.element_size() * math.prod(local.shape[1:])  # a rank may have no entries
            sizes = [r * row_bytes for r in rows]
            return ("allgatherv", (local.data_ptr(), sizes[self.rank()], gathered.data_ptr(), size_array(sizes),
                                   size_array(offsets(sizes)), BYTES), [local, gathered])

        def finish():
            total = torch.sparse_coo_tensor(all_indices.t(), all_values, tensor.shape).coalesce()
            tensor.copy_(total)

        self._run(*gather(indices, all_indices))
        return self._run(*gather(values, all_values), outputs=[tensor], finish=finish)

    def allreduce_coalesced(self, tensors, opts=None):
        if not tensors:
            return self.barrier()
        same_dtype(tensors, "allreduce_coalesced")
        r = Reduction(tensors[0].dtype, op_of(opts), "allreduce")
        flat = Buffer(concatenated(tensors), reduction=r)
        return self._run("allreduce", (flat.address, flat.address, flat.count, r.dtype, r.op), [flat], tensors,
                         [flat], finish=lambda: unpack(flat.tensor.view(torch.uint8), tensors))

    def broadcast(self, tensors, opts=None):
        tensor = single(tensors, "broadcast")
        root = self._root(opts)
        b = Buffer(tensor)
        return self._run("broadcast", (b.address, b.nbytes, BYTES, root), [b], tensors, [b])

    def reduce(self, tensors, opts=None):
        tensor = single(tensors, "reduce")
        root = self._root(opts)
        r = Reduction(tensor.dtype, op_of(opts), "reduce")
        b = Buffer(tensor, reduction=r)
        return self._run("reduce", (b.address, b.address, b.count, r.dtype, r.op, root), [b], tensors, [b])

    def allgather(self, output_tensors, input_tensors, opts=None):
        tensor = single(input_tensors, "allgather")
        outputs = single(output_tensors, "allgather")
        self._check_count(outputs, "allgather's output list")
        same_layout([tensor] + list(outputs), "allgather")
        b = Buffer(tensor, output=False)
        gathered = torch.empty(self.size() * b.nbytes, dtype=torch.uint8, device=tensor.device)
        return self._run("allgather", (b.address, gathered.data_ptr(), b.nbytes, BYTES), [b, gathered],
                         output_tensors, finish=lambda: unpack(gathered, outputs))

    def _allgather_base(self, output, input, opts=None):
        if output.numel() != self.size() * input.numel() or output.dtype != input.dtype:
            raise RuntimeError("kolo: _allgather_base needs an output of %d x %d %s elements, got %d %s"
                               % (self.size(), input.numel(), input.dtype, output.numel(), output.dtype))
        i, o = Buffer(input, output=False), Buffer(output)
        return self._run("allgather", (i.address, o.address, i.nbytes, BYTES), [i, o], [output], [o])

    def allgather_coalesced(self, output_lists, input_list, opts=None):
        self._check_count(output_lists, "allgather_coalesced's output lists")
        for outputs in output_lists:
            if [(t.dtype, t.numel()) for t in outputs] != [(t.dtype, t.numel()) for t in input_list]:
                raise RuntimeError("kolo: allgather_coalesced's output lists must match its inputs' dtypes and sizes")
        flat = pack(input_list)
        gathered = torch.empty(self.size() * flat.numel(), dtype=torch.uint8)

        def finish():
            for r, outputs in enumerate(output_lists):
                unpack(gathered[r * flat.numel():(r + 1) * flat.numel()], outputs)

        return self._run("allgather", (flat.data_ptr(), gathered.data_ptr(), flat.numel(), BYTES),
                         [flat, gathered], [t for outputs in output_lists for t in outputs], finish=finish)

    def gather(self, output_tensors, input_tensors, opts=None):
        tensor = single(input_tensors, "gather")
        root = self._root(opts)
        b = Buffer(tensor, output=False)
        outputs, gathered, address = [], None, None
        if self.rank() == root:
            outputs = single(output_tensors, "gather")
            self._check_count(outputs, "gather's output list")
            same_layout([tensor] + list(outputs), "gather")
            gathered = torch.empty(self.size() * b.nbytes, dtype=torch.uint8, device=tensor.device)
            address = gathered.data_ptr()
        elif output_tensors and any(output_tensors):
            raise RuntimeError("kolo: gather takes output tensors only on the root rank %d" % root)
        return self._run("gather", (b.address, address, b.nbytes, BYTES, root), [b, gathered], outputs,
                         finish=(lambda: unpack(gathered, outputs)) if gathered is not None else None)

    def scatter(self, output_tensors, input_tensors, opts=None):
        tensor = single(output_tensors, "scatter")
        root = self._root(opts)
        flat, address = None, None
        if self.rank() == root:
            inputs = single(input_tensors, "scatter")
            self._check_count(inputs, "scatter's input list")
            same_layout([tensor] + list(inputs), "scatter")
            flat = pack(inputs)
            address = flat.data_ptr()
        elif input_tensors and any(input_tensors):
            raise RuntimeError("kolo: scatter takes input tensors only on the root rank %d" % root)
        o = Buffer(tensor)
        return self._run("scatter", (address, o.address, o.nbytes, BYTES, root), [flat, o], output_tensors, [o])

    def reduce_scatter(self, output_tensors, input_tensors, opts=None):
        tensor = single(output_tensors, "reduce_scatter")
        inputs = single(input_tensors, "reduce_scatter")
        self._check_count(inputs, "reduce_scatter's input list")
        same_dtype([tensor] + list(inputs), "reduce_scatter")
        if inputs[self.rank()].numel() != tensor.numel():
            raise RuntimeError("kolo: reduce_scatter's output has %d elements but this rank's input %d"
                               % (tensor.numel(), inputs[self.rank()].numel()))
        r = Reduction(tensor.dtype, op_of(opts), "reducescatter")
        flat = Buffer(concatenated(inputs), output=False, reduction=r)
        o = Buffer(tensor, reduction=r)
        counts = size_array([r.count(t.numel()) for t in inputs])
        return self._run("reduce_scatterv", (flat.address, o.address, counts, r.dtype, r.op), [flat, o],
                         output_tensors, [o])

    def _reduce_scatter_base(self, output, input, opts=None):
        if input.numel() != self.size() * output.numel() or output.dtype != input.dtype:
            raise RuntimeError("kolo: _reduce_scatter_base needs an input of %d x %d %s elements, got %d %s"
                               % (self.size(), output.numel(), output.dtype, input.numel(), input.dtype))
        r = Reduction(output.dtype, op_of(opts), "reducescatter")
        i, o = Buffer(input, output=False, reduction=r), Buffer(output, reduction=r)
        return self._run("reduce_scatter", (i.address, o.address, o.count, r.dtype, r.op), [i, o], [output], [o])

    def alltoall_base(self, output, input, output_split_sizes, input_split_sizes, opts=None):
        if output.dtype != input.dtype:
            raise RuntimeError("kolo: alltoall_base's input is %s but its output %s" % (input.dtype, output.dtype))
        send = self._splits(input, input_split_sizes, "input")
        recv = self._splits(output, output_split_sizes, "output")
        i, o = Buffer(input, output=False), Buffer(output)
        if len(set(send + recv)) == 1 and send[0] > 0:  # equal parts: kolo_alltoall (which has a _stream form)
            return self._run("alltoall", (i.address, o.address, send[0], BYTES), [i, o], [output], [o])
        return self._run("alltoallv", (i.address, size_array(send), size_array(offsets(send)), o.address,
                                       size_array(recv), size_array(offsets(recv)), BYTES), [i, o], [output],
                         [o])

    def alltoall(self, output_tensors, input_tensors, opts=None):
        self._check_count(output_tensors, "alltoall's output list")
        self._check_count(input_tensors, "alltoall's input list")
        send = [t.numel() * t.element_size() for t in input_tensors]
        recv = [t.numel() * t.element_size() for t in output_tensors]
        flat_in = pack(input_tensors)
        flat_out = torch.empty(sum(recv), dtype=torch.uint8)
        return self._run("alltoallv", (flat_in.data_ptr(), size_array(send), size_array(offsets(send)),
                                       flat_out.data_ptr(), size_array(recv), size_array(offsets(recv)), BYTES),
                         [flat_in, flat_out], output_tensors, finish=lambda: unpack(flat_out, output_tensors))

    def barrier(self, opts=None):
        return self._run("barrier", (), [])

    def monitored_barrier(self, timeout=None, wait_all_ranks=False):
        """gloo's monitored barrier, as `group.monitored_barrier(timeout)`
        (torch's dist.monitored_barrier() takes gloo groups only): every
        rank reports to rank 0, which raises naming the first rank that did
        not report within timeout (with wait_all_ranks, every such rank),
        and otherwise releases them all. As on gloo, a barrier that failed
        leaves the group unusable: its unanswered receives stay posted."""
        if timeout is None:
            seconds = self._deadline_s
        else:
            seconds = timeout.total_seconds() if isinstance(timeout, datetime.timedelta) else float(timeout)
        ms = int(seconds * 1000)
        rank, size = self.rank(), self.size()
        if rank != 0:
            try:
                self.send([torch.zeros(1)], 0).wait()
                self.recv([torch.zeros(1)], 0).wait(datetime.timedelta(seconds=seconds))
            except RuntimeError as e:
                raise RuntimeError("Rank %d successfully reached monitoredBarrier, but received errors while waiting "
                                   "for send/recv from rank 0. Please check rank 0 logs for faulty rank. (%s)"
                                   % (rank, e)) from e
            return
        if seconds <= 0 and not wait_all_ranks:
            raise RuntimeError("Rank 0 timed out in monitoredBarrier after %d ms" % ms)
        start = time.monotonic()
        reports = {r: self.recv([torch.zeros(1)], r) for r in range(1, size)}
        late = []
        for r, work in reports.items():
            remaining = seconds - (time.monotonic() - start)
            if remaining <= 0 and not wait_all_ranks:
                raise RuntimeError("Rank 0 timed out in monitoredBarrier after %d ms" % ms)
            try:
                if remaining > 0:
                    work.wait(datetime.timedelta(seconds=remaining))
                elif not work.is_completed():
                    late.append(r)
            except KoloTimeoutError:
                if not wait_all_ranks:
                    raise RuntimeError("Rank %d failed to pass monitoredBarrier in %d ms" % (r, ms)) from None
                late.append(r)
        if late:
            raise RuntimeError("Ranks %s failed to pass monitoredBarrier in %d ms" % (", ".join(map(str, late)), ms))
        for r in range(1, size):
            self.send([torch.zeros(1)], r).wait()

    # torch 2's names for the operations on whole tensors, and their
    # coalesced forms (one work for several tensors: kolo runs a group's
    # operations in order, so the last one's completion covers them all,
    # and a failure of any is the communicator's and so the last one's).
    all_gather_single = _allgather_base
    reduce_scatter_single = _reduce_scatter_base
    all_to_all_single = alltoall_base

    def allgather_into_tensor_coalesced(self, outputs, inputs, opts=None):
        return self._each("allgather_into_tensor_coalesced", self._allgather_base, outputs, inputs, opts)

    def reduce_scatter_tensor_coalesced(self, outputs, inputs, opts=None):
        return self._each("reduce_scatter_tensor_coalesced", self._reduce_scatter_base, outputs, inputs, opts)

    all_gather_single_coalesced = allgather_into_tensor_coalesced
    reduce_scatter_single_coalesced = reduce_scatter_tensor_coalesced

    def _each(self, what, operation, outputs, inputs, opts):
        if len(outputs) != len(inputs):
            raise RuntimeError("kolo: %s takes as many outputs as inputs, got %d and %d"
                               % (what, len(outputs), len(inputs)))
        if not inputs:
            return self.barrier()
        works = [operation(o, i, opts) for o, i in zip(outputs, inputs)]
        return Coalesced(works, outputs)


    # --- point to point ---

    def send(self, tensors, dst, tag=0):
        tensor = single(tensors, "send")
        check_rank(dst, self.size(), "peer")
        b = Buffer(tensor, output=False)
        return self._run("send", (b.address, b.nbytes, BYTES, dst), [b])

    def recv(self, tensors, src, tag=0):
        tensor = single(tensors, "recv")
        check_rank(src, self.size(), "peer")
        b = Buffer(tensor)
        return self._run("recv", (b.address, b.nbytes, BYTES, src), [b], tensors, [b])

    def recv_anysource(self, tensors, tag=0):
        """The next message any rank sends this one (kolo_recv_any: each
        sender's messages still arrive in its order); the work's
        source_rank() says who sent it. It waits for no send or receive
        called after it, and runs after those called before, posted first
        (kolo takes it outside a group)."""
        tensor = single(tensors, "recv")
        b = Buffer(tensor)
        source = ctypes.c_int(-1)
        with self._lock:
            self._post_batch()
        work = self._run("recv_any", (b.address, b.nbytes, BYTES, ctypes.byref(source)), [b, source], tensors, [b])
        work._source = source
        return work

    # --- helpers ---

    def _check_count(self, tensors, what):
        if len(tensors) != self.size():
            raise RuntimeError("kolo: %s needs %d tensors (one per rank), got %d" % (what, self.size(), len(tensors)))

    def _root(self, opts):
        return check_rank(opts.rootRank if opts is not None else 0, self.size(), "root")

    def _splits(self, tensor, split_sizes, what):
        """Bytes to or from each rank: split_sizes rows each, else equal parts."""
        rows = tensor.shape[0] if tensor.dim() > 0 else tensor.numel()
        row_bytes = tensor.element_size() * (tensor.numel() // rows if rows else 0)
        if not split_sizes:
            if rows % self.size():
                raise RuntimeError("kolo: alltoall_base's %s has %d rows, not divisible by %d ranks"
                                   % (what, rows, self.size()))
            return [rows // self.size() * row_bytes] * self.size()
        if len(split_sizes) != self.size() or sum(split_sizes) != rows:
            raise RuntimeError("kolo: alltoall_base's %s split sizes %s must be %d numbers adding up to its %d rows"
                               % (what, list(split_sizes), self.size(), rows))
        return [s * row_bytes for s in split_sizes]

