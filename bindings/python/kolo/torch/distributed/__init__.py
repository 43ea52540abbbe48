"""kolo as a torch.distributed backend. `import kolo.torch` registers it
(registration.register(); so does torch's entry point into kolo,
_kolo_torch_backend.py, for programs that never import kolo):

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
PowerSGD) runs next, at the same place of the order on every rank. A
failure (a lost peer, a timeout, ranks disagreeing) fails the future
with kolo's message and then every later operation of the group, on
every rank. The `timeout` given to init_process_group/new_group is the
deadline of every kolo wait in the group (KOLO_TIMEOUT_S instead, when set
and the timeout is torch's default).

Differences from gloo: send/recv tags are not matched (messages between
two ranks match in call order, as NCCL's do); the bitwise and PREMUL_SUM
reductions raise RuntimeError. recv from any source (kolo_recv_any) works
between ranks that reach each other over shared memory or TCP.

The parts: process_group (the group: one operation's submission in
kolo's order, its lifetime), collectives (each torch collective as kolo
calls), coalescing (several works as one), shrink (torch's shrink_group),
rendezvous (a group's communicator from torch's store), registration
(the creator torch calls), tensors (torch tensors as kolo buffers) and
work (torch's Work and Future over kolo's requests).
"""
from kolo.torch.distributed.process_group import BACKEND_NAME, KoloProcessGroup  # noqa: F401
from kolo.torch.distributed.registration import create, register  # noqa: F401
