"""Jobs started rank by rank, with no launcher, so that a rank may die or
stop without the others being ended (the failure tests' jobs): each rank is
a Python script of tests/scripts/ whose arguments name its rank, and says
how it ended in lines "rank R: ...". free_port() gives a port to meet on."""
import os
import re
import subprocess
import sys

from kolo.runner.supervisor import free_port  # noqa: F401 (the tests' port to meet on)


def start(script, args_of_rank, size, **env):
    """Ranks 0..size-1 of `script`, rank r with args_of_rank(r), in this
    environment less a launcher's rank variables, plus env."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("KOLO_RANK", "KOLO_WORLD", "KOLO_MASTER"))}
    environ.update(env)
    return [subprocess.Popen([sys.executable, script] + [str(a) for a in args_of_rank(r)], env=environ,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for r in range(size)]


def finish(procs, timeout=120):
    """{rank: its last "rank R: ..." line}, every rank's exit status, and
    all the output."""
    outputs = [p.communicate(timeout=timeout)[0] for p in procs]
    lines = {}
    for out in outputs:
        for m in re.finditer(r"^rank (\d+): (.*)$", out, re.M):
            lines[int(m.group(1))] = m.group(2)
    return lines, [p.returncode for p in procs], "\n".join(outputs)
