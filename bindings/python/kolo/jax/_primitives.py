"""kolo.jax's primitives: one per collective, each an XLA custom call of
kolo's FFI handlers (_ffi.cc, built and registered by _build.py), eager
(through a compiled call of its own) and inside jax.jit alike.

The order. XLA may run independent operations in any order, and two ranks
that run the same two collectives in different orders wait for each other
for ever. So every kolo collective carries one JAX *ordered effect*
(_KoloEffect): JAX then threads an ordering token through every call that
has it, in program order, within a compiled function and from one eager
call or compiled function to the next, and each handler takes the token
and returns the next. Every rank runs the same program, so every rank
runs kolo's collectives in the same order. (This uses JAX's effect
machinery from jax._src, as mpi4jax does: the project pins jax.)

These primitives are not differentiable themselves: kolo.jax's public
functions wrap them in jax.custom_vjp with Horovod's gradients.
"""
import functools

import numpy as np
from jax._src import core, dispatch, effects
from jax.extend.core import Primitive
from jax.ffi import ffi_lowering
from jax.interpreters import mlir

from kolo.jax import _build  # noqa: F401  (the handlers, registered with XLA)


class _KoloEffect(effects.Effect):
    """kolo's collectives, in the order the program calls them."""

    def __eq__(self, other):
        return isinstance(other, _KoloEffect)

    def __hash__(self):
        return hash("kolo.jax ordered collectives")


EFFECT = _KoloEffect()
effects.lowerable_effects.add_type(_KoloEffect)
effects.ordered_effects.add_type(_KoloEffect)
effects.control_flow_allowed_effects.add_type(_KoloEffect)
effects.custom_derivatives_allowed_effects.add_type(_KoloEffect)

# Each attribute's type on the handler's side (_ffi.cc's Attr<...>).
_ATTRIBUTE_TYPES = {"process_set": np.int32, "op": np.int32, "root": np.int32, "block": np.int64}


def _lowering(target, always_in_place=False):
    """The custom call of kolo_jax_<target>, the ordering token in and out.
    A primitive's `in_place` parameter (a bool, or one per operand) says
    which outputs are their input's buffer (kolo works in place there);
    the handler does not take it. always_in_place: every output is its
    input's buffer whatever the parameter says (XLA copies the input first
    where it must)."""
    def lower(ctx, *operands, in_place=False, **params):
        in_place = in_place if isinstance(in_place, tuple) else (in_place,) * len(operands)
        if always_in_place:
            in_place = (True,) * len(operands)
        rule = ffi_lowering("kolo_jax_" + target, has_side_effect=True,
                            operand_output_aliases={i: i for i, aliased in enumerate(in_place) if aliased} or None)
        token = ctx.tokens_in.get(EFFECT)
        with_token = ctx.replace(avals_in=(*ctx.avals_in, core.abstract_token),
                                 avals_out=(*ctx.avals_out, core.abstract_token))
        results = list(rule(with_token, *operands, token,
                            **{k: _ATTRIBUTE_TYPES[k](v) for k, v in params.items()}))
        ctx.set_tokens_out(mlir.TokenSet({EFFECT: results.pop()}))
        return results
    return lower


def _primitive(target, shape_of=None, many=False):
    """A primitive of one array in, one out (shape_of(shape, **params): the
    output's shape), of many in and as many out of their shapes (many), or
    of none in and none out."""
    p = Primitive("kolo_" + target)
    p.def_impl(functools.partial(dispatch.apply_primitive, p))
    if many:
        p.multiple_results = True
        p.def_effectful_abstract_eval(lambda *xs, **params: ([core.ShapedArray(x.shape, x.dtype) for x in xs],
                                                             {EFFECT}))
    elif shape_of is None:
        p.multiple_results = True
        p.def_effectful_abstract_eval(lambda **params: ([], {EFFECT}))
    else:
        p.def_effectful_abstract_eval(
            lambda x, **params: (core.ShapedArray(shape_of(x.shape, **params), x.dtype), {EFFECT}))
    _register_lowerings(p, target)
    mlir.register_lowering(p, _not_served)  # every other platform
    return p


def _register_lowerings(p, target, wrap=lambda lower: lower):
    """p's lowering on the CPU (kolo_jax_<target>) and on CUDA GPUs
    (kolo_jax_<target>_cuda: the _stream calls on XLA's stream). On a GPU a
    broadcast is always in place: kolo's handler has no device copy of its
    own."""
    mlir.register_lowering(p, wrap(_lowering(target)), platform="cpu")
    mlir.register_lowering(p, wrap(_lowering(target + "_cuda", always_in_place=target == "broadcast")),
                           platform="cuda")


def _not_served(ctx, *operands, **params):
    raise NotImplementedError("kolo.jax serves CPU and CUDA arrays, not %s arrays "
                              "(put the arrays on the CPU: jax.device_put(x, jax.devices('cpu')[0]))"
                              % "/".join(ctx.module_context.platforms))


def _same(shape, **_):
    return shape


# params: in_place (see _lowering); allreduce_many's, one per array.
allreduce_p = _primitive("allreduce", _same)
allreduce_many_p = _primitive("allreduce_many", many=True)  # arrays of one dtype in one allreduce
broadcast_p = _primitive("broadcast", _same)
alltoall_p = _primitive("alltoall", _same)
# params: size, the set's ranks (the output's first dimension is theirs together, or this rank's part).
allgather_p = _primitive("allgather", lambda shape, process_set, size: (shape[0] * size,) + tuple(shape[1:]))
reducescatter_p = _primitive("reducescatter",
                             lambda shape, process_set, op, size: (shape[0] // size,) + tuple(shape[1:]))
barrier_p = _primitive("barrier")


def _without(name, lowering_params):
    """allgather's and reducescatter's `size` shapes the output, but the
    handler does not take it: their lowering drops it."""
    def lower(ctx, *operands, **params):
        params.pop(name)
        return lowering_params(ctx, *operands, **params)
    return lower


_register_lowerings(allgather_p, "allgather", functools.partial(_without, "size"))
_register_lowerings(reducescatter_p, "reducescatter", functools.partial(_without, "size"))
