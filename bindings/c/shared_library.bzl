"""The development link libkolo.so -> libkolo.so.MAJOR, as Bazel outputs.

libkolo.so.MAJOR is the real library, linked with that SONAME; a program
linked with -lkolo records the SONAME, so at run time the loader looks for
libkolo.so.MAJOR. The link's runfiles carry both names, so a test that has
//bindings/c:libkolo.so as data can link against it and run the result.
"""

def _dev_link_impl(ctx):
    lib = ctx.file.library
    link = ctx.actions.declare_file(ctx.label.name)
    ctx.actions.symlink(output = link, target_file = lib)
    return [DefaultInfo(
        files = depset([link]),
        runfiles = ctx.runfiles(files = [link, lib]),
    )]

dev_link = rule(
    implementation = _dev_link_impl,
    attrs = {
        "library": attr.label(allow_single_file = True, mandatory = True),
    },
    doc = "A symlink named like the target to `library`, both in runfiles.",
)
