"""Runs every fenced code block of README.md and docs/*.md, so the docs
cannot rot (tools/test.sh runs it after the optimized build):

  c          a program with main() is compiled against kolo.h and libkolo
             and run on 2 ranks under kolorun; one without main() runs
             inside one that has a communicator and the names the docs use
             (comm, world, rank, size, n, grads, buf, ...), with every
             kolo_* call's result checked (a failure ends the program with
             kolo_last_error). "c gpu": compiled where a CUDA toolkit is,
             and run only where a GPU is (KOLO_DOCS_GPU=1).
  python     run on 2 ranks under kolorun, in the project's environment.
  sh         checked: `bash -n`, and every file of the checkout and every
             Bazel target it names exists. "sh run": also run, from the
             checkout's root.
  text       a picture: nothing to run.

  .venv/bin/python tools/docs_check.py [--list] [FILE...]

Prints a line per block and "docs: N blocks ran, N checked, N failed";
exits 1 if any failed. Uses bazel-bin/bindings/c/libkolo.so (build it
first) or KOLO_LIBRARY."""
import argparse
import glob
import os
import re
import shlex
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CUDA = "/usr/local/cuda"
FENCE = re.compile(r"^```([^\n]*)\n(.*?)^```[ \t]*$", re.S | re.M)
# Names a fragment may use, defined before it runs.
C_FRAGMENT = """#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
%(includes)s
#include "kolo.h"

static kolo_result_t docs_checked(kolo_result_t result, const char* call, int line) {
  if (result != KOLO_SUCCESS) {
    fprintf(stderr, "%%s (the block's line %%d) failed: %%s\\n", call, line, kolo_last_error());
    exit(1);
  }
  return result;
}
%(wrappers)s
int main(void) {
  kolo_comm_t comm;
  kolo_comm_init_from_env(&comm);
  kolo_comm_t world = comm;
  int rank, size;
  kolo_comm_rank(comm, &rank);
  kolo_comm_size(comm, &size);
  const int nranks = size;
  const size_t n = 1024, m = 16;
  static float grads[1024], buf[1024], out[1024], in[1024], params[16], grad[256 * 1024];
  for (size_t i = 0; i < n; ++i) grads[i] = buf[i] = out[i] = (float)(rank + 1);
  (void)world; (void)nranks; (void)m; (void)params; (void)grad; (void)in;
  {
#line 1 "%(where)s"
%(body)s
  }
  kolo_barrier(world);
  kolo_comm_destroy(world);
  return 0;
}
"""


def blocks(path):
    text = open(path).read()
    for m in FENCE.finditer(text):
        info = m.group(1).split()
        yield text[:m.start()].count("\n") + 1, (info[0] if info else ""), info[1:], m.group(2)


def kolo_calls():
    header = open(os.path.join(ROOT, "bindings", "c", "kolo.h")).read()
    return sorted(set(re.findall(r"^kolo_result_t (kolo_\w+)\(", header, re.M)))


def python_exe():
    """The project's environment (tools/setup.sh), else this interpreter.
    By its real folder (.venv is a link to it), as the tests name it:
    TensorFlow's compile flags carry the path, and kolo's kernels are
    cached by them."""
    venv = os.path.join(os.path.realpath(os.path.join(ROOT, ".venv")), "bin", "python")
    return venv if os.path.exists(venv) else sys.executable


def library():
    return os.environ.get("KOLO_LIBRARY") or os.path.join(ROOT, "bazel-bin", "bindings", "c", "libkolo.so")


def build_cache():
    """Where kolo's TensorFlow kernels and XLA handlers, built on first
    use, are kept: the tests' shared folder (tests/lib/common.sh), so that
    a fresh machine builds each once for the tests and the docs alike."""
    base = os.environ.get("KOLO_TEST_BUILD_CACHE") or "/tmp/kolo-test-build-cache-%d" % os.getuid()
    return {"KOLO_TF_OPS_DIR": os.path.join(base, "tf_ops"), "KOLO_JAX_OPS_DIR": os.path.join(base, "jax_ffi")}


def ranks(argv, timeout=240):
    """argv on 2 ranks under kolorun; (ok, output)."""
    env = dict(build_cache(), **os.environ)
    env.update(KOLO_LIBRARY=library(), KOLO_TIMEOUT_S=os.environ.get("KOLO_TIMEOUT_S", "60"))
    cmd = [python_exe(), os.path.join(ROOT, "tools", "kolorun"), "-np", "2", "--timeout", str(timeout)] + argv
    p = subprocess.run(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return p.returncode == 0, p.stdout


def run_c(where, attrs, body, work):
    source = os.path.join(work, "block.c")
    if "main(" in body:
        code = body
    else:
        includes = "\n".join(l for l in body.splitlines() if l.startswith("#include"))
        wrappers = "\n".join("#define %s(...) docs_checked(%s(__VA_ARGS__), \"%s\", __LINE__)" % (c, c, c)
                             for c in kolo_calls())
        body = "\n".join("" if l.startswith("#include") else l for l in body.splitlines())
        code = C_FRAGMENT % {"includes": includes, "wrappers": wrappers, "where": where, "body": body}
    with open(source, "w") as f:
        f.write(code)
    program = os.path.join(work, "block")
    libdir = os.path.dirname(os.path.realpath(library()))
    flags = []
    if "gpu" in attrs:
        if not os.path.isfile(os.path.join(CUDA, "include", "cuda_runtime.h")):
            return True, "checked: not compiled, no CUDA toolkit at %s" % CUDA
        flags = ["-I", os.path.join(CUDA, "include"), "-L", os.path.join(CUDA, "lib64"), "-lcudart"]
    compiled = subprocess.run(["cc", "-std=c11", "-Wall", "-Werror", "-Wno-unused-variable", "-Wno-unused-but-set-variable", "-o", program, source,
                               "-I", ROOT, "-I", os.path.join(ROOT, "bindings", "c"), "-L", libdir,
                               "-l:" + os.path.basename(os.path.realpath(library())), "-Wl,-rpath," + libdir] + flags,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if compiled.returncode != 0:
        return False, "does not compile:\n" + compiled.stdout
    if "gpu" in attrs and os.environ.get("KOLO_DOCS_GPU") != "1":
        return True, "checked: compiled; running it needs a GPU (KOLO_DOCS_GPU=1)"
    ok, output = ranks([program])
    return ok, "ran on 2 ranks" if ok else "failed on 2 ranks:\n" + output


def run_python(where, attrs, body, work):
    script = os.path.join(work, "block.py")
    with open(script, "w") as f:
        f.write(body)
    ok, output = ranks([python_exe(), script])
    return ok, "ran on 2 ranks" if ok else "failed on 2 ranks:\n" + output


def bazel_target_exists(label):
    package, _, name = label[2:].partition(":")
    if name in ("", "all", "*") or package.endswith("..."):
        return os.path.isdir(os.path.join(ROOT, package.rstrip("./")))
    build = os.path.join(ROOT, package, "BUILD.bazel")
    if not os.path.isfile(build):
        return False
    text = open(build).read()
    return re.search(r'name = "%s"' % re.escape(name), text) is not None or \
        re.search(r'"%s"' % re.escape(name), text) is not None or \
        os.path.exists(os.path.join(ROOT, package, name))


def check_sh(where, attrs, body, work):
    syntax = subprocess.run(["bash", "-n"], input=body, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if syntax.returncode != 0:
        return False, "bash -n: " + syntax.stdout
    missing = []
    for line in body.splitlines():
        command = line.split("#", 1)[0]
        try:
            words = shlex.split(command)
        except ValueError:
            words = command.split()
        for word in words:
            for label in re.findall(r"(?<!:)//[\w/.-]*(?::[\w.-]+)?", word):  # not a URL's scheme://
                if not bazel_target_exists(label):
                    missing.append(label)
            m = re.match(r"^(?:\./)?((?:tools|bench|examples|bindings|tests|runtime|collectives|transport|gpu|common|"
                         r"docs)/[\w./-]*[\w-])$", word)
            if m and "*" not in word and not os.path.exists(os.path.join(ROOT, m.group(1))):
                missing.append(m.group(1))
            m = re.match(r"^bazel-bin/([\w/.-]+)/([\w.-]+)$", word)
            if m and not bazel_target_exists("//%s:%s" % (m.group(1), m.group(2))):
                missing.append(word)
    if missing:
        return False, "names what does not exist: " + ", ".join(sorted(set(missing)))
    if "run" not in attrs:
        return True, "checked"
    p = subprocess.run(["bash", "-e", "-c", body], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=600)
    return p.returncode == 0, "ran" if p.returncode == 0 else "failed:\n" + p.stdout


RUNNERS = {"c": run_c, "python": run_python, "sh": check_sh}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--list", action="store_true", help="list the blocks and what would be done")
    parser.add_argument("files", nargs="*")
    args = parser.parse_args()
    files = args.files or [os.path.join(ROOT, "README.md")] + sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")))
    counts = {"ran": 0, "checked": 0, "failed": 0}
    with tempfile.TemporaryDirectory() as work:
        for path in files:
            for line, language, attrs, body in blocks(path):
                where = "%s:%d" % (os.path.relpath(path, ROOT), line)
                label = " ".join([language] + attrs) or "(no language)"
                if language == "text":
                    continue
                if language not in RUNNERS:
                    print("%s %s: FAILED (no way to run a block of this language; use %s or text)"
                          % (where, label, ", ".join(RUNNERS)))
                    counts["failed"] += 1
                    continue
                if args.list:
                    print("%s %s" % (where, label))
                    continue
                ok, what = RUNNERS[language](where, attrs, body, work)
                print("%s %s: %s" % (where, label, what if ok else "FAILED, " + what), flush=True)
                counts["failed" if not ok else "checked" if what.startswith("checked") else "ran"] += 1
    if not args.list:
        print("docs: %(ran)d blocks ran, %(checked)d checked, %(failed)d failed" % counts)
    return 1 if counts["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
