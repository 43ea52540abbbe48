"""Training through torch.distributed on the kolo backend ends where the
same training on the gloo backend ends, in the same job: DDP,
ZeroRedundancyOptimizer, and a two-stage pipeline over send/recv."""
import torch
import torch.distributed as dist
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.nn.parallel import DistributedDataParallel as DDP


def model():
    torch.manual_seed(0)  # the same initial parameters on every rank and backend
    return torch.nn.Sequential(torch.nn.Linear(12, 48), torch.nn.Tanh(), torch.nn.Linear(48, 48), torch.nn.Tanh(),
                               torch.nn.Linear(48, 1))


def batches(steps, seed=0):
    g = torch.Generator().manual_seed(100 * seed + dist.get_rank())  # each rank its own data
    for _ in range(steps):
        x = torch.randn(16, 12, generator=g)
        yield x, torch.sin(x.sum(1, keepdim=True))


def parameters(m):
    return torch.cat([p.detach().reshape(-1) for p in m.parameters()])


def train_ddp(group, steps=8, **ddp_options):
    net = model()
    ddp = DDP(net, process_group=group, **ddp_options)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    losses = []
    for x, y in batches(steps):
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(ddp(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return parameters(net), losses


def test_ddp_trains_as_on_gloo(gloo):
    on_kolo, kolo_losses = train_ddp(None)
    on_gloo, gloo_losses = train_ddp(gloo)
    # The sums may add in another order: equal to float32 rounding.
    torch.testing.assert_close(on_kolo, on_gloo, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(torch.tensor(kolo_losses), torch.tensor(gloo_losses), rtol=1e-5, atol=1e-6)
    assert not torch.equal(on_kolo, parameters(model())), "training moved the parameters"
    # Every rank holds the same parameters.
    gathered = [torch.empty_like(on_kolo) for _ in range(dist.get_world_size())]
    dist.all_gather(gathered, on_kolo)
    for other in gathered:
        assert torch.equal(other, on_kolo)


def test_ddp_with_small_buckets_and_no_sync(gloo):
    # Many buckets in flight at once, from DDP's autograd hooks; and
    # gradient accumulation with no_sync between synchronized steps.
    def run(group):
        net = model()
        ddp = DDP(net, process_group=group, bucket_cap_mb=0.001)
        optimizer = torch.optim.SGD(ddp.parameters(), lr=0.05)
        for i, (x, y) in enumerate(batches(6, seed=1)):
            if i % 2 == 0:
                with ddp.no_sync():
                    torch.nn.functional.mse_loss(ddp(x), y).backward()
            else:
                torch.nn.functional.mse_loss(ddp(x), y).backward()
                optimizer.step()
                optimizer.zero_grad()
        return parameters(net)

    torch.testing.assert_close(run(None), run(gloo), rtol=1e-5, atol=1e-6)


def test_zero_redundancy_optimizer_as_on_gloo(gloo):
    def run(group):
        net = model()
        ddp = DDP(net, process_group=group)
        optimizer = ZeroRedundancyOptimizer(ddp.parameters(), optimizer_class=torch.optim.Adam, lr=0.01,
                                            process_group=group)
        for x, y in batches(5, seed=2):
            optimizer.zero_grad()
            torch.nn.functional.mse_loss(ddp(x), y).backward()
            optimizer.step()
        optimizer.consolidate_state_dict(to=0)  # the shards' state, gathered on rank 0
        state = optimizer.state_dict() if dist.get_rank() == 0 else None
        return parameters(net), state

    on_kolo, kolo_state = run(None)
    on_gloo, gloo_state = run(gloo)
    torch.testing.assert_close(on_kolo, on_gloo, rtol=1e-5, atol=1e-6)
    if dist.get_rank() == 0:
        assert len(kolo_state["state"]) == len(gloo_state["state"]) == len(list(model().parameters()))
        for k in kolo_state["state"]:
            torch.testing.assert_close(kolo_state["state"][k]["exp_avg"], gloo_state["state"][k]["exp_avg"],
                                       rtol=1e-5, atol=1e-6)


def test_two_stage_pipeline_over_send_recv():
    """Ranks pair up: the even rank of a pair runs the first half of the
    model and sends activations; the odd one runs the second half, sends
    the activations' gradient back. The first half's gradient must equal
    the one of the whole model run in one process."""
    rank, size = dist.get_rank(), dist.get_world_size()
    if size % 2:
        pairs = size - 1  # the last rank sits out
    else:
        pairs = size
    net = model()
    first, second = net[:2], net[2:]
    x, y = next(batches(1, seed=3 + rank // 2))
    if rank >= pairs:
        return
    if rank % 2 == 0:
        for _ in range(3):  # several micro-batches in a row
            hidden = first(x)
            dist.send(hidden.detach(), rank + 1)
            grad = torch.empty_like(hidden)
            dist.recv(grad, rank + 1)
            hidden.backward(grad)
        whole = model()
        for _ in range(3):
            torch.nn.functional.mse_loss(whole(x), y).backward()
        for p, q in zip(first.parameters(), whole[:2].parameters()):
            torch.testing.assert_close(p.grad, q.grad, rtol=1e-5, atol=1e-7)
    else:
        # The odd rank needs its partner's targets: the same generator seed.
        g = torch.Generator().manual_seed(100 * (3 + rank // 2) + rank - 1)
        px = torch.randn(16, 12, generator=g)
        py = torch.sin(px.sum(1, keepdim=True))
        for _ in range(3):
            hidden = torch.empty(16, 48)
            dist.recv(hidden, rank - 1)
            hidden.requires_grad_()
            torch.nn.functional.mse_loss(second(hidden), py).backward()
            dist.send(hidden.grad, rank - 1)


def test_ddp_wire_hook_averages_in_the_format_bitwise_alike_on_every_rank(gloo):
    from kolo.torch import ddp_comm_hooks
    exact, exact_losses = train_ddp(gloo, steps=6)
    for wire, feedback in [("bf16", False), ("int8", True)]:
        net = model()
        ddp = DDP(net)
        state = ddp_comm_hooks.WireState(wire=wire, error_feedback=feedback)
        ddp.register_comm_hook(state, ddp_comm_hooks.wire_hook)
        optimizer = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
        losses = []
        for x, y in batches(6):
            optimizer.zero_grad()
            loss = torch.nn.functional.mse_loss(ddp(x), y)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        got = parameters(net)
        # Close to the exact training, and the same bits on every rank.
        assert (got - exact).abs().max().item() < 0.02 * exact.abs().max().item(), wire
        gathered = [torch.empty_like(got) for _ in range(dist.get_world_size())]
        dist.all_gather(gathered, got)
        for other in gathered:
            assert torch.equal(other, got), wire
        assert (state.residual_bytes > 0) == feedback
