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
copy, written back on completion. A completion thread per group waits for
the handles in that same order and completes each work's future, so no
completion needs the Python main thread (DDP waits from its autograd
thread). A failure (a lost peer, a timeout, ranks disagreeing) fails the
future with kolo's message and then every later operation of the group,
on every rank. The `timeout` given to init_process_group/new_group is the
deadline of every kolo wait in the group (KOLO_TIMEOUT_S instead, when set
and the timeout is torch's default).

Differences from gloo: send/recv tags are not matched (messages between
two ranks match in call order, as NCCL's do); recv from any source and
the bitwise and PREMUL_SUM reductions raise RuntimeError.
"""
import atexit
import collections
import ctypes
import datetime
import os
import queue
import threading
import weakref

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import ProcessGroup, Work

from kolo._library import (DTYPE_CODES, ERR_TIMEOUT, OP_AVG, OP_MAX, OP_MIN, OP_PROD, OP_SUM, SUCCESS, Config,
                           KoloError, KoloTimeoutError, UniqueId, check, error_for, lib)

BACKEND_NAME = "kolo"
_ID_KEY = "kolo/unique_id"

# The dtypes kolo reduces; any other dtype is moved as bytes by the
# operations that only copy.
_REDUCED = {
    torch.int8: "int8", torch.uint8: "uint8", torch.int32: "int32", torch.int64: "int64",
    torch.float16: "float16", torch.bfloat16: "bfloat16", torch.float32: "float32", torch.float64: "float64",
}
_BYTES = DTYPE_CODES["uint8"]
_OPS = {dist.ReduceOp.SUM: OP_SUM, dist.ReduceOp.PRODUCT: OP_PROD, dist.ReduceOp.MIN: OP_MIN,
        dist.ReduceOp.MAX: OP_MAX, dist.ReduceOp.AVG: OP_AVG}
# bool as uint8 0/1: or for SUM and MAX, and for PRODUCT and MIN (gloo's).
_BOOL_OPS = {OP_SUM: OP_MAX, OP_MAX: OP_MAX, OP_PROD: OP_MIN, OP_MIN: OP_MIN}


def _size_array(values):
    return (ctypes.c_size_t * max(len(values), 1))(*values)


class _Buffer:
    """A tensor as kolo sees it: a contiguous tensor (the caller's own, or a
    copy written back by `write_back`) and its address."""

    def __init__(self, tensor, output=True):
        if not isinstance(tensor, torch.Tensor):
            raise TypeError("kolo: expected a torch.Tensor, got %s" % type(tensor).__name__)
        if tensor.device.type not in ("cpu", "cuda"):
            raise RuntimeError("kolo: tensors must be on the CPU or a CUDA device, not %s" % tensor.device)
        if tensor.is_sparse:
            raise RuntimeError("kolo: sparse tensors are not supported by the kolo backend")
        self.user = tensor
        self.tensor = tensor if tensor.is_contiguous() else tensor.contiguous()
        self.copied = output and self.tensor is not tensor
        if tensor.is_cuda:
            # kolo runs device buffers after the legacy default stream's work:
            # make the current stream's work (which produced them) done first.
            torch.cuda.current_stream(tensor.device).synchronize()
        self.address = self.tensor.data_ptr()

    @property
    def nbytes(self):
        return self.tensor.numel() * self.tensor.element_size()

    def write_back(self):
        if self.copied:
            self.user.copy_(self.tensor)


def _reduced(tensor, op):
    """(kolo dtype, kolo op) for reducing tensor with torch's op, or a
    RuntimeError naming what kolo cannot reduce."""
    code = _OPS.get(op)
    if code is None:
        raise RuntimeError("kolo: ReduceOp %s is not supported by the kolo backend (it has SUM, PRODUCT, MIN, MAX "
                           "and AVG)" % op)
    if tensor.dtype == torch.bool:
        if code == OP_AVG:
            raise RuntimeError("kolo: ReduceOp AVG of bool tensors is undefined")
        return DTYPE_CODES["uint8"], _BOOL_OPS[code]
    name = _REDUCED.get(tensor.dtype)
    if name is None:
        raise RuntimeError("kolo: cannot reduce %s tensors (kolo reduces %s)"
                           % (tensor.dtype, ", ".join(str(d) for d in _REDUCED)))
    return DTYPE_CODES[name], code


def _same_layout(tensors, what):
    first = tensors[0]
    for t in tensors[1:]:
        if t.dtype != first.dtype or t.numel() != first.numel():
            raise RuntimeError("kolo: %s tensors must all have the same dtype and number of elements; got %s[%d] "
                               "and %s[%d]" % (what, first.dtype, first.numel(), t.dtype, t.numel()))


def _flat(tensors):
    """One contiguous byte tensor holding tensors one after another."""
    if not tensors:
        return torch.empty(0, dtype=torch.uint8)
    return torch.cat([t.contiguous().view(-1).view(torch.uint8) for t in tensors])


def _unflat(flat, tensors):
    """Copies a byte tensor laid out as _flat's back into tensors."""
    offset = 0
    for t in tensors:
        n = t.numel() * t.element_size()
        t.copy_(flat[offset:offset + n].view(t.dtype).view(t.shape))
        offset += n


def _single(tensors, what):
    if len(tensors) != 1:
        raise RuntimeError("kolo: %s takes one tensor per process (one device per process), got %d"
                           % (what, len(tensors)))
    return tensors[0]


def _check_root(root, size):
    if not 0 <= root < size:
        raise RuntimeError("kolo: root rank %d is out of range for a group of %d ranks" % (root, size))


def _failure(code, deadline_s):
    """The exception for a failed kolo call (on the failing thread). A
    timeout says "Timed out" as gloo's and NCCL's do, which is what
    PyTorch's own tests look for."""
    error = error_for(code)
    if code == ERR_TIMEOUT:
        return KoloTimeoutError("kolo: Timed out after %g s (the process group's timeout): %s" % (deadline_s, error),
                                code)
    return error


class _Completer(threading.Thread):
    """Waits for a group's operations in the order they were called (the
    order kolo runs them in) and completes their futures."""

    def __init__(self, deadline_s):
        super().__init__(name="kolo-process-group", daemon=True)
        self.pending = queue.Queue()
        self.deadline_s = deadline_s

    def run(self):
        while True:
            item = self.pending.get()
            if item is None:
                return
            raw, keep, finish, future = item
            code = lib.kolo_handle_wait(raw, -1.0)
            error = _failure(code, self.deadline_s) if code != SUCCESS else None
            lib.kolo_handle_release(raw)
            try:
                if error is None:
                    result = finish()
            except Exception as e:  # a write-back that failed: the caller's to see
                error = e
            del keep
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(result)


class _Work(Work):
    """One operation's work: its future completes with the outputs, or with
    kolo's error, which wait() raises (torch's future-wrapping work would
    swallow it: its wait() returns True whatever happened).

    A send or receive is posted at the first wait, poll or future asked of
    it or of any send or receive after it, or at the group's next
    collective (see KoloProcessGroup._post_batch)."""

    def __init__(self, group, future, point_to_point=False):
        super().__init__()
        # Weakly: the group keeps its recent works, and must not be kept
        # alive by them once torch lets it go.
        self._group = weakref.ref(group) if point_to_point else None
        self._future = future
        self.point_to_point = point_to_point

    def _posted(self):
        group = self._group() if self._group is not None else None
        if group is not None:
            group.post_point_to_point()

    def wait(self, timeout=None):
        self._posted()
        self._future.wait()  # raises the operation's error
        return True

    def is_completed(self):
        self._posted()
        return self._future.done()

    def is_success(self):
        if not self._future.done():
            return False
        try:
            self._future.value()
        except Exception:
            return False
        return True

    def exception(self):
        if not self._future.done():
            return None
        try:
            self._future.value()
        except Exception as e:
            return e
        return None

    def get_future(self):
        self._posted()
        return self._future

    def result(self):
        self.wait()
        return self._future.value()

    def source_rank(self):
        raise RuntimeError("kolo: source_rank is only known for recv from any source, which kolo does not do")

    def synchronize(self):
        self.wait()


class KoloProcessGroup(ProcessGroup):
    """A torch.distributed process group over a kolo communicator."""

    def __init__(self, store, rank, size, timeout):
        super().__init__(rank, size)
        self._comm = ctypes.c_void_p()
        _join(self._comm, store, rank, size, timeout)
        self._lock = threading.Lock()  # a call and its place in the completion order go together
        self._batch = []  # sends and receives not yet posted
        self._alive = {}  # id -> _Work, until it completes
        self._recent = collections.deque(maxlen=1024)  # the last works done
        self._completer = _Completer(_deadline_s(timeout))
        self._completer.start()
        _groups.add(self)
        _completers.add(self._completer)

    def getBackendName(self):
        return BACKEND_NAME

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
        completer = getattr(self, "_completer", None)
        if completer is not None:
            completer.pending.put(None)
        lib.kolo_comm_destroy(comm)  # every handle completes: the completer ends
        if completer is not None and completer is not threading.current_thread():
            completer.join(timeout=30)

    # --- the submission of one operation ---

    def _run(self, call, args, keep, outputs=(), written=(), finish=None):
        """Calls kolo_<call>_async(comm, *args) and returns a Work whose
        future completes with `outputs` once kolo has run it, after writing
        back `written` (_Buffers) and running `finish`. Sends and receives
        wait in a batch (see _post_batch)."""
        future = torch.futures.Future()

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
            work = _Work(self, future, point_to_point=call in ("send", "recv"))
            # C++ callers (DDP) hold the work only as a C++ pointer: were
            # this Python object to die, their wait() and getFuture() would
            # reach Work's unimplemented base. Kept until done, then among
            # the group's last completed works.
            if work.point_to_point:
                self._batch.append(operation)
            else:
                self._post_batch()
                self._post(operation, raise_errors=True)  # a bad argument raises here, with no work
            self._alive[id(work)] = work
            group = weakref.ref(self)
            future.add_done_callback(lambda _: _retire(group, work))
        return work

    def _post(self, operation, raise_errors=False):
        call, args, keep, complete, future = operation
        raw = ctypes.c_void_p()
        code = getattr(lib, "kolo_%s_async" % call)(self._comm, *args, ctypes.byref(raw))
        if code != SUCCESS:
            if raise_errors:
                raise _failure(code, self._completer.deadline_s)
            future.set_exception(_failure(code, self._completer.deadline_s))
            return
        self._completer.pending.put((raw, keep, complete, future))

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
        tensor = _single(tensors, "allreduce")
        if tensor.is_sparse:
            return self._sparse_allreduce(tensor, _op(opts))
        dtype, op = _reduced(tensor, _op(opts))
        b = _Buffer(tensor)
        return self._run("allreduce", (b.address, b.address, tensor.numel(), dtype, op), [b], tensors, [b])

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
        self._run("allgather", (mine_count.data_ptr(), counts.data_ptr(), 8, _BYTES), [mine_count, counts]).wait()
        rows = counts.tolist()
        all_indices = torch.empty(sum(rows), indices.shape[1], dtype=indices.dtype)
        all_values = torch.empty((sum(rows),) + tuple(values.shape[1:]), dtype=values.dtype)

        def gather(local, gathered):
            row_bytes = local.element_size() * (local[0].numel() if local.dim() > 1 else 1)
            sizes = [r * row_bytes for r in rows]
            return ("allgatherv", (local.data_ptr(), sizes[self.rank()], gathered.data_ptr(), _size_array(sizes),
                                   _size_array(_offsets(sizes)), _BYTES), [local, gathered])

        def finish():
            total = torch.sparse_coo_tensor(all_indices.t(), all_values, tensor.shape).coalesce()
            tensor.copy_(total)

        self._run(*gather(indices, all_indices))
        return self._run(*gather(values, all_values), outputs=[tensor], finish=finish)

    def allreduce_coalesced(self, tensors, opts=None):
        if not tensors:
            return self.barrier()
        _same_dtype(tensors, "allreduce_coalesced")
        dtype, op = _reduced(tensors[0], _op(opts))
        flat = torch.cat([t.contiguous().view(-1) for t in tensors])
        if dtype == DTYPE_CODES["uint8"] and tensors[0].dtype == torch.bool:
            flat = flat.view(torch.uint8)
        address = flat.data_ptr()
        return self._run("allreduce", (address, address, flat.numel(), dtype, op), [flat], tensors,
                         finish=lambda: _unflat(flat.view(torch.uint8), tensors))

    def broadcast(self, tensors, opts=None):
        tensor = _single(tensors, "broadcast")
        root = opts.rootRank if opts is not None else 0
        _check_root(root, self.size())
        b = _Buffer(tensor)
        return self._run("broadcast", (b.address, b.nbytes, _BYTES, root), [b], tensors, [b])

    def reduce(self, tensors, opts=None):
        tensor = _single(tensors, "reduce")
        root = opts.rootRank if opts is not None else 0
        _check_root(root, self.size())
        dtype, op = _reduced(tensor, _op(opts))
        b = _Buffer(tensor)
        return self._run("reduce", (b.address, b.address, tensor.numel(), dtype, op, root), [b], tensors, [b])

    def allgather(self, output_tensors, input_tensors, opts=None):
        tensor = _single(input_tensors, "allgather")
        outputs = _single(output_tensors, "allgather")
        self._check_count(outputs, "allgather's output list")
        _same_layout([tensor] + list(outputs), "allgather")
        b = _Buffer(tensor, output=False)
        gathered = torch.empty(self.size() * b.nbytes, dtype=torch.uint8, device=tensor.device)
        return self._run("allgather", (b.address, gathered.data_ptr(), b.nbytes, _BYTES), [b, gathered],
                         output_tensors, finish=lambda: _unflat(gathered, outputs))

    def _allgather_base(self, output, input, opts=None):
        if output.numel() != self.size() * input.numel() or output.dtype != input.dtype:
            raise RuntimeError("kolo: _allgather_base needs an output of %d x %d %s elements, got %d %s"
                               % (self.size(), input.numel(), input.dtype, output.numel(), output.dtype))
        i, o = _Buffer(input, output=False), _Buffer(output)
        return self._run("allgather", (i.address, o.address, i.nbytes, _BYTES), [i, o], [output], [o])

    def allgather_coalesced(self, output_lists, input_list, opts=None):
        self._check_count(output_lists, "allgather_coalesced's output lists")
        for outputs in output_lists:
            if [(t.dtype, t.numel()) for t in outputs] != [(t.dtype, t.numel()) for t in input_list]:
                raise RuntimeError("kolo: allgather_coalesced's output lists must match its inputs' dtypes and sizes")
        flat = _flat(input_list)
        gathered = torch.empty(self.size() * flat.numel(), dtype=torch.uint8)

        def finish():
            for r, outputs in enumerate(output_lists):
                _unflat(gathered[r * flat.numel():(r + 1) * flat.numel()], outputs)

        return self._run("allgather", (flat.data_ptr(), gathered.data_ptr(), flat.numel(), _BYTES),
                         [flat, gathered], [t for outputs in output_lists for t in outputs], finish=finish)

    def gather(self, output_tensors, input_tensors, opts=None):
        tensor = _single(input_tensors, "gather")
        root = opts.rootRank if opts is not None else 0
        _check_root(root, self.size())
        b = _Buffer(tensor, output=False)
        outputs, gathered, address = [], None, None
        if self.rank() == root:
            outputs = _single(output_tensors, "gather")
            self._check_count(outputs, "gather's output list")
            _same_layout([tensor] + list(outputs), "gather")
            gathered = torch.empty(self.size() * b.nbytes, dtype=torch.uint8, device=tensor.device)
            address = gathered.data_ptr()
        elif output_tensors and any(output_tensors):
            raise RuntimeError("kolo: gather takes output tensors only on the root rank %d" % root)
        return self._run("gather", (b.address, address, b.nbytes, _BYTES, root), [b, gathered], outputs,
                         finish=(lambda: _unflat(gathered, outputs)) if gathered is not None else None)

    def scatter(self, output_tensors, input_tensors, opts=None):
        tensor = _single(output_tensors, "scatter")
        root = opts.rootRank if opts is not None else 0
        _check_root(root, self.size())
        flat, address = None, None
        if self.rank() == root:
            inputs = _single(input_tensors, "scatter")
            self._check_count(inputs, "scatter's input list")
            _same_layout([tensor] + list(inputs), "scatter")
            flat = _flat(inputs)
            address = flat.data_ptr()
        elif input_tensors and any(input_tensors):
            raise RuntimeError("kolo: scatter takes input tensors only on the root rank %d" % root)
        o = _Buffer(tensor)
        return self._run("scatter", (address, o.address, o.nbytes, _BYTES, root), [flat, o], output_tensors, [o])

    def reduce_scatter(self, output_tensors, input_tensors, opts=None):
        tensor = _single(output_tensors, "reduce_scatter")
        inputs = _single(input_tensors, "reduce_scatter")
        self._check_count(inputs, "reduce_scatter's input list")
        _same_dtype([tensor] + list(inputs), "reduce_scatter")
        if inputs[self.rank()].numel() != tensor.numel():
            raise RuntimeError("kolo: reduce_scatter's output has %d elements but this rank's input %d"
                               % (tensor.numel(), inputs[self.rank()].numel()))
        dtype, op = _reduced(tensor, _op(opts))
        flat = torch.cat([t.contiguous().view(-1) for t in inputs])
        if tensor.dtype == torch.bool:
            flat = flat.view(torch.uint8)
        o = _Buffer(tensor)
        counts = _size_array([t.numel() for t in inputs])
        return self._run("reduce_scatterv", (flat.data_ptr(), o.address, counts, dtype, op), [flat, o],
                         output_tensors, [o])

    def _reduce_scatter_base(self, output, input, opts=None):
        if input.numel() != self.size() * output.numel() or output.dtype != input.dtype:
            raise RuntimeError("kolo: _reduce_scatter_base needs an input of %d x %d %s elements, got %d %s"
                               % (self.size(), output.numel(), output.dtype, input.numel(), input.dtype))
        dtype, op = _reduced(output, _op(opts))
        i, o = _Buffer(input, output=False), _Buffer(output)
        return self._run("reduce_scatter", (i.address, o.address, output.numel(), dtype, op), [i, o], [output],
                         [o])

    def alltoall_base(self, output, input, output_split_sizes, input_split_sizes, opts=None):
        if output.dtype != input.dtype:
            raise RuntimeError("kolo: alltoall_base's input is %s but its output %s" % (input.dtype, output.dtype))
        send = self._splits(input, input_split_sizes, "input")
        recv = self._splits(output, output_split_sizes, "output")
        i, o = _Buffer(input, output=False), _Buffer(output)
        return self._run("alltoallv", (i.address, _size_array(send), _size_array(_offsets(send)), o.address,
                                       _size_array(recv), _size_array(_offsets(recv)), _BYTES), [i, o], [output],
                         [o])

    def alltoall(self, output_tensors, input_tensors, opts=None):
        self._check_count(output_tensors, "alltoall's output list")
        self._check_count(input_tensors, "alltoall's input list")
        send = [t.numel() * t.element_size() for t in input_tensors]
        recv = [t.numel() * t.element_size() for t in output_tensors]
        flat_in = _flat(input_tensors)
        flat_out = torch.empty(sum(recv), dtype=torch.uint8)
        return self._run("alltoallv", (flat_in.data_ptr(), _size_array(send), _size_array(_offsets(send)),
                                       flat_out.data_ptr(), _size_array(recv), _size_array(_offsets(recv)), _BYTES),
                         [flat_in, flat_out], output_tensors, finish=lambda: _unflat(flat_out, output_tensors))

    def barrier(self, opts=None):
        return self._run("barrier", (), [])

    # --- point to point ---

    def send(self, tensors, dst, tag=0):
        tensor = _single(tensors, "send")
        self._check_peer(dst)
        b = _Buffer(tensor, output=False)
        return self._run("send", (b.address, b.nbytes, _BYTES, dst), [b])

    def recv(self, tensors, src, tag=0):
        tensor = _single(tensors, "recv")
        self._check_peer(src)
        b = _Buffer(tensor)
        return self._run("recv", (b.address, b.nbytes, _BYTES, src), [b], tensors, [b])

    def recv_anysource(self, tensors, tag=0):
        raise RuntimeError("kolo: recv from any source is not supported (kolo matches every message to the rank "
                           "that sent it); pass src")

    # --- helpers ---

    def _check_count(self, tensors, what):
        if len(tensors) != self.size():
            raise RuntimeError("kolo: %s needs %d tensors (one per rank), got %d" % (what, self.size(), len(tensors)))

    def _check_peer(self, peer):
        if not 0 <= peer < self.size():
            raise RuntimeError("kolo: peer rank %d is out of range for a group of %d ranks" % (peer, self.size()))

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


def _retire(group_ref, work):
    group = group_ref()
    if group is not None:
        group._alive.pop(id(work), None)
        group._recent.append(work)


def _offsets(counts):
    out, total = [], 0
    for c in counts:
        out.append(total)
        total += c
    return out


def _same_dtype(tensors, what):
    if any(t.dtype != tensors[0].dtype for t in tensors):
        raise RuntimeError("kolo: %s tensors must all have one dtype; got %s"
                           % (what, sorted({str(t.dtype) for t in tensors})))


def _op(opts):
    return opts.reduceOp if opts is not None else dist.ReduceOp.SUM


def _deadline_s(timeout):
    """The kolo deadline for torch's timeout: KOLO_TIMEOUT_S when set and
    the timeout is torch's default, else the timeout."""
    if "KOLO_TIMEOUT_S" in os.environ and timeout == dist.default_pg_timeout:
        return float(os.environ["KOLO_TIMEOUT_S"])
    return timeout.total_seconds()


def _join(comm, store, rank, size, timeout):
    """Creates the group's communicator: rank 0 starts a kolo rendezvous and
    publishes its id in torch's store; every rank then joins it."""
    ident = UniqueId()
    if rank == 0:
        check(lib.kolo_get_unique_id(ctypes.byref(ident)))
        store.set(_ID_KEY, ctypes.string_at(ctypes.addressof(ident), ctypes.sizeof(ident)))
    else:
        got = store.get(_ID_KEY)
        if len(got) != ctypes.sizeof(ident):
            raise RuntimeError("kolo: the store's %s holds %d bytes, not a kolo id" % (_ID_KEY, len(got)))
        ctypes.memmove(ctypes.addressof(ident), got, len(got))
    config = Config.unset()
    config.timeout_s = _deadline_s(timeout)
    # The rank computes on the CPU while kolo communicates (DDP overlaps its
    # allreduces with the backward pass): kolo's thread polls briefly and
    # yields rather than spin for milliseconds on a core the compute needs.
    # KOLO_SPIN_US / KOLO_SPIN_YIELD, when set, decide instead.
    if "KOLO_SPIN_US" not in os.environ:
        config.spin_us = 50
    if "KOLO_SPIN_YIELD" not in os.environ:
        config.spin_yield = 1
    check(lib.kolo_comm_init_rank(ctypes.byref(comm), size, ctypes.byref(ident), rank, ctypes.byref(config)))


def _create(store, rank, size, timeout):
    if not isinstance(timeout, datetime.timedelta):
        raise RuntimeError("kolo: timeout must be a datetime.timedelta, not %r" % (timeout,))
    try:
        return KoloProcessGroup(store, rank, size, timeout)
    except KoloError as e:
        raise RuntimeError("kolo: could not create the process group (rank %d of %d): %s" % (rank, size, e)) from e


# At exit, before the interpreter finalizes: the groups still open close,
# and every completer thread ends (one whose group was closed on it, by its
# last reference going there, may still be finishing). A daemon thread
# still freeing tensors when the interpreter finalizes is ended inside
# libtorch, which aborts the process.
_groups = weakref.WeakSet()
_completers = weakref.WeakSet()


@atexit.register
def _close_all():
    for group in list(_groups):
        group._close()
    for completer in list(_completers):
        completer.join(timeout=30)


def _register():
    if BACKEND_NAME.upper() not in dist.Backend._plugins:
        dist.Backend.register_backend(BACKEND_NAME, _create)


_register()
