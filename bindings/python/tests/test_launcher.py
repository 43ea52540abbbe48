"""kolorun's pure parts, without hosts: the -H and hostfile syntax, where
ranks go (local and cross ranks as Horovod defines them), the choice of each
host's interface from what the probes reached, and the environment passed
to other hosts. tests/launchers/ssh_test.sh runs the whole launcher across
emulated hosts."""
import shutil
import subprocess

import pytest

from kolo.runner import hosts, network, session


def test_host_lists_in_order_with_default_slots():
    assert hosts.parse_hosts("a:2,b, c:3\nd") == [("a", 2), ("b", 1), ("c", 3), ("d", 1)]
    assert hosts.parse_hosts("[fe80::1]:4,fe80::2") == [("fe80::1", 4), ("fe80::2", 1)]


@pytest.mark.parametrize("text, message", [
    ("a:0", "'a:0': slots must be a whole number of at least 1, got '0'"),
    ("a:x", "'a:x': slots must be a whole number of at least 1, got 'x'"),
    ("a:2,:3", "':3': not a host name"),
    ("a:2,a:1", "host a is listed twice"),
])
def test_bad_host_lists_name_the_entry(text, message):
    with pytest.raises(hosts.HostsError, match="^-H: " + message.replace("(", r"\(").replace(")", r"\)")):
        hosts.parse_hosts(text)


def test_discovery_lists_may_repeat_a_host():
    assert hosts.parse_hosts("a:2\na:3\nb", strict=False) == [("a", 2), ("b", 1)]


def test_hostfile(tmp_path):
    path = tmp_path / "hosts"
    path.write_text("# the cluster\nserver1 slots=4\nserver2 slots=2 max_slots=8  # two\n\nserver3\n")
    assert hosts.read_hostfile(str(path)) == [("server1", 4), ("server2", 2), ("server3", 1)]
    path.write_text("server1 slots=4\nserver2 cores=2\n")
    with pytest.raises(hosts.HostsError, match=r"line 2: 'server2 cores=2': expected `host slots=N`"):
        hosts.read_hostfile(str(path))
    path.write_text("# nothing\n")
    with pytest.raises(hosts.HostsError, match="no hosts in it"):
        hosts.read_hostfile(str(path))
    with pytest.raises(hosts.HostsError, match="No such file"):
        hosts.read_hostfile(str(tmp_path / "none"))


def test_ranks_fill_hosts_in_order():
    got = [(p.rank, p.host, p.local_rank, p.local_size) for p in hosts.place(5, [("a", 2), ("b", 2), ("c", 4)])]
    assert got == [(0, "a", 0, 2), (1, "a", 1, 2), (2, "b", 0, 2), (3, "b", 1, 2), (4, "c", 0, 1)]
    with pytest.raises(hosts.HostsError, match="-np 5 is more ranks than the 4 slots of a:2,b:2"):
        hosts.place(5, [("a", 2), ("b", 2)])


def test_cross_ranks_as_horovod_defines_them():
    # The cross communicator of local rank k holds one rank of every host
    # with more than k ranks, in host order.
    even = [(p.cross_rank, p.cross_size) for p in hosts.place(4, [("a", 2), ("b", 2)])]
    assert even == [(0, 2), (0, 2), (1, 2), (1, 2)]
    uneven = [(p.local_rank, p.cross_rank, p.cross_size) for p in hosts.place(4, [("a", 2), ("b", 1), ("c", 1)])]
    assert uneven == [(0, 0, 3), (1, 0, 1), (0, 1, 3), (0, 2, 3)]


def test_round_robin_placement():
    got = [(p.host, p.local_rank, p.local_size, p.cross_rank) for p in hosts.describe(["h0", "h1", "h0"])]
    assert got == [("h0", 0, 2, 0), ("h1", 0, 1, 1), ("h0", 1, 2, 0)]


def test_local_host_names():
    assert hosts.is_local("localhost") and hosts.is_local("127.0.0.1")
    assert hosts.is_local("10.0.0.7", {"10.0.0.7", "127.0.0.1"})
    assert not hosts.is_local("10.0.0.8", {"10.0.0.7", "127.0.0.1"})
    assert not hosts.is_local("no-such-host.invalid", {"127.0.0.1"})


def decoy_cluster(count):
    """Hosts with eth0 (10.0.0.i, reached by all) and docker0 (172.17.0.1 on
    every host, its default route): a host that probes 172.17.0.1 reaches
    itself, whose listener answers with its own index, so nobody counts it."""
    listed = [{"name": "h%d" % i, "interfaces": [("lo", "127.0.0.1"), ("eth0", "10.0.0.%d" % i),
                                                 ("docker0", "172.17.0.1")], "default": "docker0"}
              for i in range(count)]
    reached = {i: {(j, "eth0", "10.0.0.%d" % j) for j in range(count) if j != i} for i in range(count)}
    return listed, reached


def test_the_interface_every_other_host_reaches_wins_over_the_default_route():
    listed, reached = decoy_cluster(3)
    choices = network.choose(listed, reached)
    assert [(c.interface, c.address) for c in choices] == [("eth0", "10.0.0.0"), ("eth0", "10.0.0.1"),
                                                            ("eth0", "10.0.0.2")]
    assert "docker0 172.17.0.1 unreached from h1, h2" in choices[0].why


def test_the_default_route_first_when_it_reaches():
    listed, reached = decoy_cluster(2)
    for i in range(2):
        listed[i]["interfaces"].append(("ib0", "10.1.0.%d" % i))
        listed[i]["default"] = "ib0"
        reached[1 - i].add((i, "ib0", "10.1.0.%d" % i))
    assert [c.interface for c in network.choose(listed, reached)] == ["ib0", "ib0"]
    assert "default route" in network.choose(listed, reached)[0].why


def test_forced_interfaces_in_their_order():
    listed, reached = decoy_cluster(2)
    assert [c.interface for c in network.choose(listed, reached, ["bond0", "eth0"])] == ["eth0", "eth0"]
    with pytest.raises(network.NetworkError,
                       match=r"host h0: no interface reached from every other host \(tried docker0 172.17.0.1: "
                             r"unreached from h1\)"):
        network.choose(listed, reached, ["docker0"])
    with pytest.raises(network.NetworkError, match="host h0 has no interface to try.*--network-interfaces bond0"):
        network.choose(listed, reached, ["bond0"])


def test_one_way_reachability_is_not_enough():
    listed, reached = decoy_cluster(3)
    reached[2].discard((0, "eth0", "10.0.0.0"))  # h2 cannot reach h0's eth0
    with pytest.raises(network.NetworkError, match="host h0: .*eth0 10.0.0.0: unreached from h2"):
        network.choose(listed, reached)


def test_what_other_hosts_get_of_the_environment():
    base = {"PATH": "/bin", "HOSTNAME": "login1", "KOLO_HOSTNAME": "login1", "BASH_FUNC_f%%": "() { :; }",
            "SSH_AUTH_SOCK": "/tmp/agent", "OMP_NUM_THREADS": "4", "DISPLAY": ":0"}
    env = session.passed_environment(base, ["DISPLAY", "NCCL_DEBUG=INFO"])
    assert env == {"PATH": "/bin", "OMP_NUM_THREADS": "4", "DISPLAY": ":0", "NCCL_DEBUG": "INFO"}


@pytest.mark.skipif(shutil.which("ssh") is None, reason="no ssh client")
def test_kolo_ssh_options_override_kolos_defaults_as_ssh_itself_resolves_them(monkeypatch):
    """ssh keeps the first value of each option: `ssh -G` (which resolves
    the options without connecting) must show the user's KOLO_SSH_OPTIONS
    over kolo's defaults, and kolorun's -p over both."""
    monkeypatch.setenv("KOLO_SSH_OPTIONS", "-o ServerAliveInterval=2 -o StrictHostKeyChecking=yes -p 2200")

    def resolved(argv):
        at = argv.index("somehost")  # the host, then the remote command
        out = subprocess.run(argv[:1] + ["-G"] + argv[1:at + 1], stdout=subprocess.PIPE, text=True,
                             check=True).stdout
        return dict(line.split(" ", 1) for line in out.splitlines() if " " in line)

    mine = resolved(session.ssh_argv("somehost", port=2222, connect_timeout=7))
    assert mine["serveraliveinterval"] == "2" and mine["stricthostkeychecking"] == "true", mine
    assert mine["port"] == "2222" and mine["batchmode"] == "yes" and mine["connecttimeout"] == "7", mine
    assert mine["serveralivecountmax"] == "3", mine
    monkeypatch.delenv("KOLO_SSH_OPTIONS")
    default = resolved(session.ssh_argv("somehost"))
    assert default["serveraliveinterval"] == "5" and default["stricthostkeychecking"] == "false", default


def test_kolo_run_refuses_bad_arguments_before_starting_anything():
    from kolo import function_job
    with pytest.raises(ValueError, match="func must be a callable"):
        function_job.run(None, np=2)
    with pytest.raises(ValueError, match="np must be at least 1"):
        function_job.run(print, np=0)
    with pytest.raises(NotImplementedError, match="kolorun --min-np"):
        function_job.run(print, np=2, min_np=1)
    # What the ranks' environment cannot carry is refused, saying how big.
    with pytest.raises(ValueError, match="pickle to [0-9]+ bytes, more than"):
        function_job.run(len, args=(b"x" * (2 << 20),), np=1)
    assert function_job.kolorun_argv(4, hosts="a:2,b:2", ssh_port=2222, network_interface=["eth1", "eth0"])[2:] == [
        "-np", "4", "-H", "a:2,b:2", "-p", "2222", "--network-interfaces", "eth1,eth0"]


def test_the_elastic_driver_answers_only_its_workers():
    """Workers show a token made from the job's secret; anyone else on the
    machine (or the network, under Ray) gets 403 and learns nothing."""
    import threading
    import urllib.error
    import urllib.request
    from types import SimpleNamespace

    from kolo.runner import elastic_driver, elastic_protocol

    class NoWorkers:
        bind_address = "127.0.0.1"

    opts = SimpleNamespace(host_discovery_script="", hosts="", slots=1, np=1)
    driver = elastic_driver.ElasticDriver(opts, [], {"KOLO_SECRET": "s3cret"}, "", threading.Lock(),
                                          launcher=NoWorkers(), discovery=lambda: [])
    url = "http://127.0.0.1:%d/hosts?since=0" % driver.serve()
    try:
        with pytest.raises(urllib.error.HTTPError, match="403"):
            urllib.request.urlopen(url, timeout=10)
        wrong = urllib.request.Request(url, headers={elastic_protocol.TOKEN_HEADER: elastic_protocol.driver_token("x")})
        with pytest.raises(urllib.error.HTTPError, match="403"):
            urllib.request.urlopen(wrong, timeout=10)
        right = urllib.request.Request(url, headers={
            elastic_protocol.TOKEN_HEADER: elastic_protocol.driver_token("s3cret")})
        with urllib.request.urlopen(right, timeout=10) as reply:
            assert reply.status == 200
        assert elastic_protocol.driver_token("s3cret") != "s3cret"  # the secret itself never goes over the wire
    finally:
        for server in driver.servers.values():
            server.shutdown()


def test_a_driver_that_never_answers_costs_its_timeout_not_a_hang(monkeypatch):
    """A worker's call to the elastic driver is bounded (KOLO_ELASTIC_TIMEOUT_S):
    a driver whose host takes the connection and never answers costs that,
    then an error, never a hang."""
    import socket
    import time

    from kolo import _elastic

    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(4)  # never accepted: the kernel takes the connection, nobody answers
    try:
        monkeypatch.setenv("KOLO_ELASTIC_DRIVER", "127.0.0.1:%d" % silent.getsockname()[1])
        monkeypatch.setenv("KOLO_ELASTIC_TIMEOUT_S", "0.5")
        monkeypatch.delenv("KOLO_SECRET", raising=False)
        start = time.monotonic()
        with pytest.raises(OSError):  # socket.timeout is a TimeoutError, an OSError
            _elastic._ask("/assignment?worker=h0:0&after=0")
        assert time.monotonic() - start < 2
    finally:
        silent.close()
