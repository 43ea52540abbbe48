"""Keeps torch.compile out of the backend's own Python code.

The backend is a Python subclass of torch's ProcessGroup and Work, so
torch's C++ (DDP's reducer, the collectives) calls back into Python frames.
Under torch.compile those frames would be handed to Dynamo, which cannot
trace a ProcessGroup's Python attributes (it treats the group as an opaque
object and stops with UnsafeScriptObjectError) and has no business tracing
communication anyway: gloo's and NCCL's code is C++, which Dynamo never
sees. `run_eagerly(cls)` marks every function of a class to run as plain
Python, it and everything it calls, the way torch's own
torch._dynamo.eval_frame.skip_code marks a frame, through the same C entry
point. That entry point is in torch's extension module, so marking costs
no import of torch._dynamo (most programs never compile). Where the entry
point is missing (another torch) nothing is marked.
"""

try:
    from torch._C._dynamo.eval_frame import _FrameAction, _FrameExecStrategy, set_code_exec_strategy
except ImportError:  # a torch without Dynamo's frame strategies
    set_code_exec_strategy = None


def _functions(cls):
    for value in vars(cls).values():
        if isinstance(value, (staticmethod, classmethod)):
            value = value.__func__
        if isinstance(value, property):
            yield from filter(None, (value.fget, value.fset, value.fdel))
        elif callable(value):
            yield value


def run_eagerly(cls):
    """Class decorator: Dynamo skips the class's functions and what they
    call, whether it meets them as frames of their own (called from torch's
    C++) or while tracing a caller (`_torchdynamo_disable`, what
    torch.compiler.disable sets, makes it call them untraced)."""
    if set_code_exec_strategy is None:
        return cls
    skip = _FrameExecStrategy(_FrameAction.SKIP, _FrameAction.SKIP)
    for fn in _functions(cls):
        fn = getattr(fn, "__wrapped__", fn)
        code = getattr(fn, "__code__", None)
        if code is None:
            continue
        set_code_exec_strategy(code, skip)
        try:
            fn._torchdynamo_disable = True
        except AttributeError:
            pass
    return cls
