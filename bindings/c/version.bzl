# kolo's version, in this one place. Everything else derives from it:
# kolo_get_version() and libkolo.so's SONAME (bindings/c/BUILD.bazel), the
# installed file names and kolo.pc (tools/install.sh parses this line), and
# the Python package (bindings/python: setup.py and kolo/_library.py parse
# it in a checkout; installs get a generated kolo/_version.py).
# MAJOR changes when the C ABI breaks (it is in the SONAME), MINOR when the
# API grows, PATCH for fixes.
KOLO_VERSION = "0.11.0"
