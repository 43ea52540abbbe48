"""Several works as one (torch's coalescing manager, the *_coalesced
collectives): done when the last is, failed if any failed."""
import torch

from kolo.torch._eager import run_eagerly
from kolo.torch.distributed.work import KoloWork


@run_eagerly
class Coalesced(KoloWork):
    """One work for several: done when the last is (kolo runs them in
    order), failed if any failed."""

    def __init__(self, works, outputs):
        futures = [w.get_future() for w in works]

        def done(_):
            for f in futures:
                f.wait()  # raises the first failure
            return list(outputs)

        future = torch.futures.collect_all(futures).then(done) if futures else completed(outputs)
        super().__init__(None, future)
        self._works = works

    def _posted(self):
        for w in self._works:
            w._posted()



def completed(outputs):
    future = torch.futures.Future()
    future.set_result(list(outputs))
    return future

