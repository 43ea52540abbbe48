"""kolo as the process group of torchft's Manager (torchft 0.2.0):

    from kolo.torch.torchft import ProcessGroupKolo
    manager = torchft.Manager(pg=ProcessGroupKolo(timeout=timedelta(seconds=5)), ...)

in place of torchft's ProcessGroupGloo. torchft reconfigures its process
group at every change of quorum (a replica group lost or back): it calls
configure() with a store address of its own for that quorum, and the
wrapper aborts the group it had (kolo_comm_abort: what is in flight fails
at once, on every rank) and makes a new one over that store, a kolo
communicator like any other (`create`, as init_process_group makes it).
A replica group that dies mid-allreduce fails the others' allreduce at once
with kolo's PEER_LOST naming it; torchft then drops the step
(should_commit is False) and carries on with the replica groups left.
Needs torchft installed (the project's environment has it).
"""
from datetime import timedelta

from torchft.process_group import ProcessGroupWrapper

from kolo.torch.distributed import create


class ProcessGroupKolo(ProcessGroupWrapper):
    """torchft's reconfigurable process group over kolo. `timeout` is the
    deadline of every kolo wait in each quorum's group."""

    def __init__(self, timeout: timedelta = timedelta(seconds=60)) -> None:
        super().__init__(timeout=timeout)

    def _create_pg(self, store, rank, world_size):
        return create(store, rank, world_size, self._timeout)

    def getBackendName(self) -> str:
        return "torchft-kolo"
