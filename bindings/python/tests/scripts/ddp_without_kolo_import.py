"""A DDP script as users write it for gloo, with backend "kolo" and no
import of kolo: torch finds the backend through the installed wheel's
"torch.backends" entry point. Checks that every rank ends with the same
weights."""
import sys

import torch, torch.distributed as dist, torch.nn as nn
dist.init_process_group("kolo")
torch.manual_seed(0)
model = nn.parallel.DistributedDataParallel(nn.Linear(8, 2))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    torch.manual_seed(step * 10 + dist.get_rank())
    loss = model(torch.randn(4, 8)).pow(2).mean(); loss.backward(); opt.step(); opt.zero_grad()
w = model.module.weight.detach().clone(); ws = [torch.empty_like(w) for _ in range(dist.get_world_size())]
dist.all_gather(ws, w)
assert all(torch.equal(x, w) for x in ws)
# One write per line: print() writes the text and its newline apart, so two
# ranks sharing the launcher's pipe could run their lines together.
sys.stdout.write("rank %d: ddp on %s ok\n" % (dist.get_rank(), dist.get_backend()))
sys.stdout.flush()
dist.destroy_process_group()
