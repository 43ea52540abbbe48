"""cuda_library: CUDA sources compiled by nvcc, only under --config=cuda.

Bazel 4.2.3 has no CUDA rules and the build must stay offline, so each
source goes through a genrule that runs the toolkit's nvcc; its object lands
in the srcs of an ordinary cc_library. Without --config=cuda that library is
empty (just its headers), so the default build needs no CUDA at all: keep the
headers free of CUDA types.

Sources that include <cuda_runtime.h> must be compiled here too, not by a
cc_library: Bazel's header check refuses includes from /usr/local/cuda/include
(it lies outside the toolchain's built-in include directories), whatever
-isystem says. nvcc compiles a .cc as plain host C++ with the CUDA headers
on its path, and a genrule has no such check. Such a library usually wants
alwayslink = True (gtest's TEST() objects are only reached through static
constructors).
"""

_NVCC = "/usr/local/cuda/bin/nvcc"

# sm_90 (H100/H200) and sm_80 (A100) run machine code; compute_90 PTX lets
# newer GPUs JIT instead of failing with "no kernel image".
_GENCODE = [
    "-gencode arch=compute_90,code=sm_90",
    "-gencode arch=compute_80,code=sm_80",
    "-gencode arch=compute_90,code=compute_90",
]

# The host compiler gets the C++ build's warnings (.bazelrc).
_NVCC_FLAGS = [
    "-O3",
    "-std=c++17",
    "-Xcompiler -fPIC",
    "-Xcompiler -Wall,-Wextra,-Wno-unused-parameter",
] + _GENCODE

# What a binary that links a cuda_library needs. cudart_static keeps the
# binaries free of a libcudart.so dependency; the driver (libcuda.so) is
# opened at run time, so a machine without a GPU still runs them.
CUDA_LINKOPTS = select({
    "//tools/bazel:cuda": [
        "-L/usr/local/cuda/lib64",
        "-lcudart_static",
        "-ldl",
        "-lrt",
        "-pthread",
    ],
    "//conditions:default": [],
})

def _dep_headers_impl(ctx):
    # Every header the deps may include, so nvcc's sandbox holds them.
    return [DefaultInfo(files = depset(transitive = [
        dep[CcInfo].compilation_context.headers
        for dep in ctx.attr.deps
    ]))]

_dep_headers = rule(
    implementation = _dep_headers_impl,
    attrs = {"deps": attr.label_list(providers = [CcInfo])},
)

def cuda_library(name, srcs, hdrs = [], deps = [], **kwargs):
    """A cc_library whose srcs (.cu, or .cc needing CUDA headers) nvcc compiles.

    Args:
      name: the cc_library's name.
      srcs: files for nvcc; each becomes one object.
      hdrs: the library's public headers (CUDA-free: default builds see them).
      deps: cc_library targets; their headers are visible to nvcc and they
        are linked as usual.
      **kwargs: passed to the cc_library (visibility, testonly, alwayslink...).
    """
    dep_headers = name + "_dep_headers"
    _dep_headers(
        name = dep_headers,
        deps = deps,
        testonly = kwargs.get("testonly", False),
        visibility = ["//visibility:private"],
    )
    objs = []
    for src in srcs:
        stem = src.rpartition(".")[0]

        # .pic.o: compiled with -fPIC, so Bazel may put it in shared
        # libraries (tests link dynamically) as well as in binaries.
        obj = "_cuda_objs/%s/%s.pic.o" % (name, stem)
        native.genrule(
            name = "%s_nvcc_%s" % (name, stem.replace("/", "_")),
            srcs = [src, ":" + dep_headers] + hdrs,
            outs = [obj],
            cmd = " ".join([_NVCC] + _NVCC_FLAGS + [
                "-I.",
                "-I$(GENDIR)",
                "-c $(location %s)" % src,
                "-o $@",
            ]),
            # Only the cc_library's select() reaches these, so wildcards
            # (//...) in a default build never ask for nvcc.
            tags = ["manual"],
            testonly = kwargs.get("testonly", False),
            visibility = ["//visibility:private"],
        )
        objs.append(":" + obj)
    native.cc_library(
        name = name,
        srcs = select({
            "//tools/bazel:cuda": objs,
            "//conditions:default": [],
        }),
        hdrs = hdrs,
        deps = deps,
        linkopts = CUDA_LINKOPTS,
        **kwargs
    )
