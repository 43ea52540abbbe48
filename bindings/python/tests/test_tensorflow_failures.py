"""kolo.tensorflow on jobs started here, rank by rank, with no launcher (so
that a rank may die without the others being ended): a dead rank and a
stalled one raise TensorFlow errors carrying kolo's message on every other
rank, within seconds."""
import os
import re

from rank_by_rank import finish, free_port, start

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "scripts", "tensorflow_job.py")


def run_job(size, scenario, **env):
    port = free_port()
    return finish(start(SCRIPT, lambda r: [r, size, port, scenario], size, **env))


def error(line):
    m = re.match(r"(\w+) after (\S+) s: (.*)", line or "")
    assert m, "no TensorFlow error: %r" % line
    return m.group(1), float(m.group(2)), m.group(3)


def test_a_dead_rank_fails_the_others_at_once():
    lines, codes, out = run_job(3, "death", KOLO_TIMEOUT_S="10")
    assert codes[2] == 3, out
    for r in (0, 1):
        kind, seconds, message = error(lines.get(r))
        assert kind == "UnknownError" and seconds < 4, out  # the lost connection says it, well before the timeout
        assert re.search(r"PEER_LOST: .*rank 2", message), out


def test_a_stalled_rank_fails_everyone_after_the_stall_limit():
    lines, codes, out = run_job(2, "stall", KOLO_TIMEOUT_S="30", KOLO_STALL_SHUTDOWN_S="2")
    kind, seconds, message = error(lines.get(0))
    assert kind == "DeadlineExceededError" and 1.5 < seconds < 6, out
    assert "stall" in message.lower(), out
    kind, _, _ = error(lines.get(1))  # it finds the engine failed when it comes back
    assert kind in ("DeadlineExceededError", "UnknownError", "AbortedError"), out
