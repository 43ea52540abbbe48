"""kolo as a torch.distributed backend. `import kolo.torch` registers it:

    import kolo.torch  # noqa: F401  (registers backend "kolo")
    torch.distributed.init_process_group(backend="kolo")

Every init method works (env://, tcp://, file://, an explicit store): the
group's rank 0 starts a kolo rendezvous (kolo_get_unique_id, on a free
port) and hands its id to the others through the store torch gives the
backend, so nothing but torch's own rendezvous needs configuring. Each
group (the default one and every new_group) is a communicator of its own.

Each operation is one of kolo's ordered asynchronous calls on the group's
communicator, run on kolo's thread in call order. Contiguous CPU tensors
are handed over as they are (zero copy); others go through a contiguous
copy, written back on completion. Each work's future is completed by a
callback on kolo's thread, after its operation and before the next, so no
completion needs the Python main thread (DDP waits from its autograd
thread), and what the future's callbacks issue (DDP comm hooks such as
PowerSGD) runs next, at the same place of the order on every rank. A failure (a lost peer, a timeout, ranks disagreeing) fails the
future with kolo's message and then every later operation of the group,
on every rank. The `timeout` given to init_process_group/new_group is the
deadline of every kolo wait in the group (KOLO_TIMEOUT_S instead, when set
and the timeout is torch's default).

Differences from gloo: send/recv tags are not matched (messages between
two ranks match in call order, as NCCL's do); the bitwise and PREMUL_SUM
reductions raise RuntimeError. recv from any source (kolo_recv_any) works
between ranks that reach each other over shared memory or TCP.
"""
import atexit
import ctypes
import datetime
import math
import os
import threading
import time
import weakref

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import ProcessGroup

from kolo._library import SUCCESS, Config, KoloError, KoloTimeoutError, UniqueId, check, error_for, lib
from kolo.torch import _device_backend
from kolo.torch._eager import run_eagerly
from kolo.torch._process_group_tensors import (BYTES, Buffer, check_rank, concatenated, offsets, op_of, pack,
                                               reduced, same_dtype, same_layout, single, size_array, unpack)
from kolo.torch._process_group_work import (KoloFuture, KoloWork, complete_when_done, failure, on_kolo_thread,
                                            retire)

BACKEND_NAME = "kolo"
_ID_KEY = "kolo/unique_id"


@run_eagerly
class KoloProcessGroup(ProcessGroup):
    """A torch.distributed process group over a kolo communicator."""

    def __init__(self, store, rank, size, timeout, comm=None):
        """A group whose rank 0 starts a rendezvous through `store`, or,
        with `comm`, the group over that kolo communicator (a shrink's)."""
        super().__init__(rank, size)
        if comm is None:
            self._comm = ctypes.c_void_p()
            deadline_s = _join(self._comm, store, rank, size, timeout)
        else:
            self._comm = comm
            seconds = ctypes.c_double()
            check(lib.kolo_comm_get_timeout(comm, ctypes.byref(seconds)))
            deadline_s = seconds.value
        # A call and its place in the order go together. Reentrant: a work
        # already done when posted completes at once on the posting thread,
        # and its future's callbacks may post more.
        self._lock = threading.RLock()
        self._batch = []  # sends and receives not yet posted
        self._alive = {}  # id -> KoloWork, until it completes
        self._coalesced = None  # inside torch's coalescing manager: the works since it began
        self._estimated_us = None  # inside torch's _time_estimator: the estimated time so far
        self._group_name = self._group_desc = ""
        self._deadline_s = deadline_s
        _groups.add(self)

    def getBackendName(self):
        return BACKEND_NAME

    # torch keeps a group's name and description in the C++ backends it
    # registers on the group; a Python group has none, so it keeps its own
    # (DeviceMesh and the functional collectives find groups by name).
    def _set_group_name(self, name):
        self._group_name = name

    def _set_group_desc(self, desc):
        self._group_desc = desc

    @property
    def group_name(self):
        return self._group_name

    @property
    def group_desc(self):
        return self._group_desc

    def __del__(self):
        self._close()

    def _close(self):
        comm, self._comm = getattr(self, "_comm", None), None
        if comm is None or not comm.value:
            return
        for operation in getattr(self, "_batch", []):  # sends and receives never posted
            operation[-1].set_exception(RuntimeError("kolo: the process group was destroyed before this send or "
                                                     "receive was waited for"))
        self._batch = []
        if on_kolo_thread():
            # Closed inside a completion (its last reference went there):
            # kolo's thread cannot destroy its own communicator.
            _closers.append(threading.Thread(target=lib.kolo_comm_destroy, args=(comm,),
                                             name="kolo-process-group-close"))
            _closers[-1].start()
        else:
            lib.kolo_comm_destroy(comm)  # runs what is queued: every work completes

    # --- the submission of one operation ---

    def _run(self, call, args, keep, outputs=(), written=(), finish=None):
        """Calls kolo_<call>_async(comm, *args) and returns a Work whose
        future completes with `outputs` once kolo has run it, after writing
        back `written` (Buffers) and running `finish`. Sends and receives
        wait in a batch (see _post_batch)."""
        future = KoloFuture()
        if self._estimated_us is not None:  # torch's _time_estimator: estimate, run nothing
            self._estimated_us += self._estimate_us(call, keep)
            future.set_result(list(outputs))
            return KoloWork(self, future, point_to_point=False)

        def complete():
            for b in written:
                b.write_back()
            if finish is not None:
                finish()
            return list(outputs)

        operation = (call, args, keep, complete, future)
        with self._lock:
            if self._comm is None:
                raise RuntimeError("kolo: this process group has been destroyed")
            work = KoloWork(self, future, point_to_point=call in ("send", "recv"))
            if self._coalesced is not None:
                self._coalesced.append(work)
            # Kept until done. After that, torch's C++ callers (DDP) hold
            # it through the PyWorkHolder torch wraps every work a Python
            # group returns in; keeping done works here too would keep
            # their output tensors (FSDP2's all-gathered parameters), and
            # memory grew by the model's size every step.
            if work.point_to_point:
                self._batch.append(operation)
            else:
                self._post_batch()
                self._post(operation, raise_errors=True)  # a bad argument raises here, with no work
            self._alive[id(work)] = work
            group = weakref.ref(self)
            future.add_done_callback(lambda _: retire(group, work))
        return work

    # --- torch.distributed._time_estimator (torch 2.13) ---

    # kolo_comm_estimate's collective for each call, and the bytes it takes
    # (the largest buffer of the call on a rank; gather and scatter: the
    # root's, N blocks of this rank's).
    _ESTIMATED = {"allreduce": "allreduce", "allreduce_wire": "allreduce", "barrier": "allreduce", "allgather": "allgather",
                  "allgatherv": "allgather", "reduce_scatter": "reduce_scatter", "reduce_scatterv": "reduce_scatter",
                  "broadcast": "broadcast", "reduce": "reduce", "gather": "gather", "scatter": "scatter",
                  "alltoallv": "alltoall"}

    def _estimate_us(self, call, keep):
        collective = self._ESTIMATED.get(call)
        if collective is None:
            raise RuntimeError("kolo: torch's time estimator covers the collectives, not %s" % call)

        def nbytes(item):
            if isinstance(item, Buffer):
                return item.nbytes
            return item.numel() * item.element_size() if isinstance(item, torch.Tensor) else 0

        size = max([nbytes(k) for k in keep] + [4])
        if collective in ("gather", "scatter"):
            size = min(nbytes(k) for k in keep if nbytes(k)) * self.size()
        seconds = ctypes.c_double()
        check(lib.kolo_comm_estimate(self._comm, collective.encode(), size, ctypes.byref(seconds), None))
        return seconds.value * 1e6

    def _start_time_estimate(self):
        with self._lock:
            self._estimated_us = 0.0

    def _end_time_estimate(self):
        """The estimated time since _start_time_estimate, in microseconds
        (as NCCL's estimator answers torch)."""
        with self._lock:
            total, self._estimated_us = self._estimated_us, None
        return total

    def _post(self, operation, raise_errors=False):
        call, args, keep, complete, future = operation
        raw = ctypes.c_void_p()
        code = getattr(lib, "kolo_%s_async" % call)(self._comm, *args, ctypes.byref(raw))
        if code != SUCCESS:
            if raise_errors:
                raise failure(code, self._deadline_s)
            future.set_exception(failure(code, self._deadline_s))
            return
        complete_when_done(raw, keep, complete, future, self._deadline_s)

    def _post_batch(self):
        """Posts the sends and receives called since the last post as one
        kolo group: they progress together, so a rank may send to one
        neighbour and receive from another (a ring shift) without waiting
        for itself. Called with the lock held."""
        batch, self._batch = self._batch, []
        if not batch:
            return
        check(lib.kolo_group_start())
        try:
            for operation in batch:
                self._post(operation)
        finally:
            code = lib.kolo_group_end()
        if code != SUCCESS:
            raise error_for(code)

    def post_point_to_point(self):
        with self._lock:
            if self._comm is not None:
                self._post_batch()

    # --- collectives ---

    def allreduce(self, tensors, opts=None):
        tensor = single(tensors, "allreduce")
        if tensor.is_sparse:
            return self._sparse_allreduce(tensor, op_of(opts))
        dtype, op = reduced(tensor, op_of(opts))
        b = Buffer(tensor)
        return self._run("allreduce", (b.address, b.address, tensor.numel(), dtype, op), [b], tensors, [b])

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
        if residuals is not None and (residuals.dtype != torch.float32 or residuals.numel() != tensor.numel()
                                      or not residuals.is_contiguous()):
            raise RuntimeError("kolo: residuals must be a contiguous float32 tensor of %d elements" % tensor.numel())
        dtype, code = reduced(tensor, op)
        address = tensor.data_ptr()
        kept = residuals.data_ptr() if residuals is not None else None
        keep = [tensor] + ([residuals] if residuals is not None else [])
        return self._run("allreduce_wire", (address, address, tensor.numel(), dtype, code, WIRE_FORMATS[wire], kept),
                         keep, [tensor])

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
        dtype, op = reduced(tensors[0], op_of(opts))
        flat = concatenated(tensors)
        address = flat.data_ptr()
        return self._run("allreduce", (address, address, flat.numel(), dtype, op), [flat], tensors,
                         finish=lambda: unpack(flat.view(torch.uint8), tensors))

    def broadcast(self, tensors, opts=None):
        tensor = single(tensors, "broadcast")
        root = self._root(opts)
        b = Buffer(tensor)
        return self._run("broadcast", (b.address, b.nbytes, BYTES, root), [b], tensors, [b])

    def reduce(self, tensors, opts=None):
        tensor = single(tensors, "reduce")
        root = self._root(opts)
        dtype, op = reduced(tensor, op_of(opts))
        b = Buffer(tensor)
        return self._run("reduce", (b.address, b.address, tensor.numel(), dtype, op, root), [b], tensors, [b])

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
        dtype, op = reduced(tensor, op_of(opts))
        flat = concatenated(inputs)
        o = Buffer(tensor)
        counts = size_array([t.numel() for t in inputs])
        return self._run("reduce_scatterv", (flat.data_ptr(), o.address, counts, dtype, op), [flat, o],
                         output_tensors, [o])

    def _reduce_scatter_base(self, output, input, opts=None):
        if input.numel() != self.size() * output.numel() or output.dtype != input.dtype:
            raise RuntimeError("kolo: _reduce_scatter_base needs an input of %d x %d %s elements, got %d %s"
                               % (self.size(), output.numel(), output.dtype, input.numel(), input.dtype))
        dtype, op = reduced(output, op_of(opts))
        i, o = Buffer(input, output=False), Buffer(output)
        return self._run("reduce_scatter", (i.address, o.address, output.numel(), dtype, op), [i, o], [output],
                         [o])

    def alltoall_base(self, output, input, output_split_sizes, input_split_sizes, opts=None):
        if output.dtype != input.dtype:
            raise RuntimeError("kolo: alltoall_base's input is %s but its output %s" % (input.dtype, output.dtype))
        send = self._splits(input, input_split_sizes, "input")
        recv = self._splits(output, output_split_sizes, "output")
        i, o = Buffer(input, output=False), Buffer(output)
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
        return _Coalesced(works, outputs)

    # torch's coalescing manager: the works between the two calls complete
    # as one.
    def _start_coalescing(self, device):
        with self._lock:
            self._coalesced = []

    def _end_coalescing(self, device):
        with self._lock:
            works, self._coalesced = self._coalesced, None
            self._post_batch()
        return _Coalesced(works or [], [])

    def abort(self):
        """Fails every operation in flight on every rank (kolo_comm_abort),
        then closes the group."""
        comm = self._comm
        if comm is not None and comm.value:
            lib.kolo_comm_abort(comm)
        self._close()

    def shutdown(self):
        self._close()

    # --- torch.distributed.shrink_group (torch 2.13) ---

    def _get_backend(self, device):
        """What torch finds as this group's backend for a device. torch
        keeps a group's backends only as C++ c10d.Backends, and kolo's group
        is the whole group; shrink_group asks for the backend to shrink it,
        so kolo answers with a view that can (_ShrinkableView)."""
        device = torch.device(device)
        if device.type not in ("cpu", "cuda"):
            raise RuntimeError("No backend type associated with device type %s" % device.type)
        return _ShrinkableView(self)

    def _shrunk(self, ranks_to_exclude, shrink_flags):
        """The group of the ranks not in ranks_to_exclude, numbered in their
        order here, over kolo_comm_shrink: it uses none of this group's
        connections and waits for no excluded rank, so it works after a
        failure and around a dead or stuck rank, within the group's
        timeout. SHRINK_ABORT (1, kolo's too) revokes this group first, so
        that an operation still in flight ends. This group stays to be
        destroyed (shrink_group does)."""
        comm = self._comm
        if comm is None or not comm.value:
            raise RuntimeError("kolo: cannot shrink a process group that was destroyed")
        ranks = sorted(int(r) for r in ranks_to_exclude)
        exclude = (ctypes.c_int * max(1, len(ranks)))(*ranks)
        new = ctypes.c_void_p()
        result = lib.kolo_comm_shrink(comm, exclude, len(ranks), None, int(shrink_flags), ctypes.byref(new))
        if result != SUCCESS:
            error = error_for(result)
            raise RuntimeError("kolo: shrinking the process group (rank %d of %d, excluding %s) failed: %s"
                               % (self.rank(), self.size(), ranks, error)) from error
        rank, size = ctypes.c_int(), ctypes.c_int()
        check(lib.kolo_comm_rank(new, ctypes.byref(rank)))
        check(lib.kolo_comm_size(new, ctypes.byref(size)))
        return KoloProcessGroup(None, rank.value, size.value, None, comm=new)

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


@run_eagerly
class _Coalesced(KoloWork):
    """One work for several: done when the last is (kolo runs them in
    order), failed if any failed."""

    def __init__(self, works, outputs):
        futures = [w.get_future() for w in works]

        def done(_):
            for f in futures:
                f.wait()  # raises the first failure
            return list(outputs)

        future = torch.futures.collect_all(futures).then(done) if futures else _completed(outputs)
        super().__init__(None, future)
        self._works = works

    def _posted(self):
        for w in self._works:
            w._posted()


class _ShrinkableView:
    """kolo's group as torch sees a backend (group._get_backend): it can
    shrink (shrink_group), and the shrunk group comes back as the
    c10d.Backend torch registers on the new group
    (kolo/torch/_device_backend.cpp; that Backend shrinks again the same
    way); it estimates collectives' times (_time_estimator). Anything else
    torch asks of a backend here is answered as a backend that supports
    none of it would."""

    supports_shrinking = True
    supports_splitting = False
    supports_coalescing = False
    supports_time_estimate = True

    def __init__(self, group):
        self._group = group

    def name(self):
        return BACKEND_NAME

    # torch's _time_estimator: the collectives called inside it run
    # nothing; their estimated times add up (kolo_comm_estimate).
    def _start_time_estimate(self):
        self._group._start_time_estimate()

    def _end_time_estimate(self):
        return self._group._end_time_estimate()

    def supports_tensor_alloc(self, device):
        return False

    def rank(self):
        return self._group.rank()

    def size(self):
        return self._group.size()

    def shrink(self, ranks_to_exclude, shrink_flags=0, opts_override=None):
        return _device_backend.shrunk_backend(self._group, ranks_to_exclude, shrink_flags, opts_override)

    def abort(self):
        self._group.abort()

    @property
    def options(self):
        return _options(self._group)


def _options(group):
    """The group's deadline as torch shows a backend's timeout."""
    from torch._C._distributed_c10d import Backend
    return Backend.Options(BACKEND_NAME, datetime.timedelta(seconds=group._deadline_s))


def _completed(outputs):
    future = torch.futures.Future()
    future.set_result(list(outputs))
    return future


def _join(comm, store, rank, size, timeout):
    """Creates the group's communicator: rank 0 starts a kolo rendezvous and
    publishes its id in torch's store; every rank then joins it. torch's
    timeout is kolo's deadline; its default (30 minutes) is only a default,
    under KOLO_TIMEOUT_S. Returns the deadline kolo settled on."""
    ident = UniqueId()
    # Per attempt: torchrun's agent keeps its store across restarts, and a
    # restarted rank must not read the id of the attempt that died.
    key = "%s/attempt-%s" % (_ID_KEY, os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    if rank == 0:
        check(lib.kolo_get_unique_id(ctypes.byref(ident)))
        store.set(key, ctypes.string_at(ctypes.addressof(ident), ctypes.sizeof(ident)))
    else:
        got = store.get(key)
        if len(got) != ctypes.sizeof(ident):
            raise RuntimeError("kolo: the store's %s holds %d bytes, not a kolo id" % (key, len(got)))
        ctypes.memmove(ctypes.addressof(ident), got, len(got))
    config = Config.sharing_cores()
    if timeout == dist.default_pg_timeout:
        config.defaults_config.timeout_s = timeout.total_seconds()
    else:
        config.timeout_s = timeout.total_seconds()
    check(lib.kolo_comm_init_rank(ctypes.byref(comm), size, ctypes.byref(ident), rank, ctypes.byref(config)))
    seconds = ctypes.c_double()
    check(lib.kolo_comm_get_timeout(comm, ctypes.byref(seconds)))
    return seconds.value


def _create(store, rank, size, timeout):
    if not isinstance(timeout, datetime.timedelta):
        raise RuntimeError("kolo: timeout must be a datetime.timedelta, not %r" % (timeout,))
    try:
        group = KoloProcessGroup(store, rank, size, timeout)
    except KoloError as e:
        raise RuntimeError("kolo: could not create the process group (rank %d of %d): %s" % (rank, size, e)) from e
    if _device_backend.in_mixed_device_map():
        return _device_backend.device_backend(group)  # kolo for its devices only ("cpu:kolo,cuda:nccl")
    return group


# At exit, before the interpreter finalizes: the groups still open close
# (their last completions run meanwhile, on kolo's thread), and so do those
# closed inside a completion, on threads of their own. A completion that
# reached Python once it finalizes would abort the process.
_groups = weakref.WeakSet()
_closers = []


@atexit.register
def _close_all():
    for group in list(_groups):
        group._close()
    for closer in _closers:
        closer.join(timeout=60)


def _register():
    """Registers "kolo" with torch for CPU and CUDA tensors (kolo moves
    both), so that init_process_group("kolo") and new_group(backend="kolo")
    find it."""
    if BACKEND_NAME.upper() not in dist.Backend._plugins:
        dist.Backend.register_backend(BACKEND_NAME, _create, devices=["cpu", "cuda"])


_register()
