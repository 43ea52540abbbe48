# Offline stand-in for rules_java: Bazel 4.2.3 loads these during toolchain
# resolution even for C++-only builds. Each forwards to the native rule.
def java_binary(**kwargs):
    native.java_binary(**kwargs)

def java_import(**kwargs):
    native.java_import(**kwargs)

def java_library(**kwargs):
    native.java_library(**kwargs)

def java_proto_library(**kwargs):
    native.java_proto_library(**kwargs)

def java_runtime(**kwargs):
    native.java_runtime(**kwargs)

def java_toolchain(**kwargs):
    native.java_toolchain(**kwargs)

def java_test(**kwargs):
    native.java_test(**kwargs)
