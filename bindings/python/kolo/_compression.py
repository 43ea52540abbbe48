"""Horovod's gradient compression, written once: Compression.none and
Compression.fp16, each a class with static compress(tensor) -> (tensor to
send, context) and decompress(tensor, context). A front end supplies only
how its tensors become float16 and back.

kolo's wire formats join them: Compression.bf16, .fp8_e4m3, .fp8_e5m2 and
.int8 (and Compression.wire(name, error_feedback=True) for any format with
error feedback) leave the tensor as it is and have the allreduce carry it
in that format, summed in float32 at every hop and bitwise the same on
every rank (docs/compression.md). They apply to float32, float16 and
bfloat16 tensors reduced by Sum or Average; other tensors are sent as they
are."""

# kolo_wire_format_t's values.
WIRE_FORMATS = {"native": 0, "bf16": 1, "fp16": 2, "fp8_e4m3": 3, "fp8_e5m2": 4, "int8": 5}


class Compressor:
    """compress(tensor) -> (tensor to send, context); decompress undoes it."""

    @staticmethod
    def compress(tensor):
        raise NotImplementedError

    @staticmethod
    def decompress(tensor, ctx):
        raise NotImplementedError


class NoneCompressor(Compressor):
    @staticmethod
    def compress(tensor):
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tensor


class WireCompressor(NoneCompressor):
    """A wire format for the allreduce (`wire`, a WIRE_FORMATS name), with
    error feedback or not: the tensor itself is not changed."""
    wire = "native"
    error_feedback = False


def wire(name, error_feedback=False):
    """The Compression class that sends in wire format `name` ("bf16",
    "fp16", "fp8_e4m3", "fp8_e5m2", "int8"); with error_feedback, what each
    allreduce of a named tensor loses is added into its next one (kolo
    keeps one float per element, kolo_engine_get_residual_bytes)."""
    if name not in WIRE_FORMATS:
        raise ValueError("unknown wire format %r: use %s" % (name, ", ".join(sorted(WIRE_FORMATS))))
    return type("WireCompressor_%s%s" % (name, "_error_feedback" if error_feedback else ""), (WireCompressor,),
                {"wire": name, "error_feedback": bool(error_feedback)})


def wire_of(compression):
    """(kolo_wire_format_t value, error feedback) that `compression` asks the
    allreduce for: (-1, False), the communicator's default, for the others."""
    name = getattr(compression, "wire", None)
    if name is None:
        return -1, False
    return WIRE_FORMATS[name], bool(getattr(compression, "error_feedback", False))


def compression(to_float16, back):
    """A Compression class whose fp16 sends floating-point tensors as
    float16 (half the bytes of float32; kolo reduces float16 in float32 and
    rounds once): to_float16(tensor) -> (float16 tensor, context) or
    (tensor, None) to leave it as it is; back(tensor, context)."""

    class FP16Compressor(Compressor):
        @staticmethod
        def compress(tensor):
            return to_float16(tensor)

        @staticmethod
        def decompress(tensor, ctx):
            return back(tensor, ctx) if ctx is not None else tensor

    class Compression:
        none = NoneCompressor
        fp16 = FP16Compressor
        bf16 = wire("bf16")
        fp8_e4m3 = wire("fp8_e4m3")
        fp8_e5m2 = wire("fp8_e5m2")
        int8 = wire("int8")

    Compression.wire = staticmethod(wire)

    return Compression
