"""torch's entry point into kolo (group "torch.backends", which
`import torch` loads): registers the torch.distributed backend "kolo", so
that init_process_group("kolo") works without `import kolo.torch`.

A module of its own, outside the kolo package: torch calls this while it
is still being imported, so it imports nothing of kolo's (which would load
libkolo and import torch.distributed's users) until a kolo group is made.
TORCH_DEVICE_BACKEND_AUTOLOAD=0 turns torch's loading of it off.
"""


def register():
    import torch.distributed as dist
    if not dist.is_available() or "KOLO" in dist.Backend._plugins:
        return

    def create(store, rank, size, timeout):
        from kolo.torch.distributed import create  # kolo.torch's import registers it again: a no-op
        return create(store, rank, size, timeout)

    dist.Backend.register_backend("kolo", create, devices=["cpu", "cuda"])
