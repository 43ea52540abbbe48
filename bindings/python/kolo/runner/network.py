"""Which address each host of a job uses, chosen from what was measured:
every host lists its interfaces, every other host tries to reach each of
them (kolo/runner/supervisor.py's probe), and a host uses the first of its
interfaces that every other host reached: in the order of
--network-interfaces (or KOLO_IFNAME) when given, else its default route's
interface first, then the kernel's order. A decoy interface (docker0, a
management network, a link to nowhere) is never taken, because somebody
could not reach it. A pure function, so the choice is tested without hosts."""
from collections import namedtuple

Choice = namedtuple("Choice", "interface address why")


class NetworkError(RuntimeError):
    """No interface of a host reaches (or is reached by) every other host."""


def candidates(interfaces, default, wanted):
    """A host's [(interface, address)] worth trying, in order of preference.
    wanted: interface names to keep, in that order (empty: any but lo)."""
    if wanted:
        return [(name, addr) for want in wanted for name, addr in interfaces if name == want]
    usable = [(name, addr) for name, addr in interfaces if name != "lo" and not addr.startswith("127.")]
    return sorted(usable, key=lambda item: item[0] != default)  # stable: the kernel's order after


def choose(hosts, reached, wanted=()):
    """hosts: [{"name", "interfaces", "default"}] by host index; reached:
    {host index: set of (host index, interface, address) it reached}.
    Returns [Choice] by host index, or raises NetworkError naming the host
    and what was tried."""
    choices = []
    for index, host in enumerate(hosts):
        others = [i for i in range(len(hosts)) if i != index]
        tried = candidates(host["interfaces"], host.get("default"), wanted)
        if not tried:
            listed = ", ".join("%s %s" % pair for pair in host["interfaces"]) or "none"
            raise NetworkError("host %s has no interface to try (%s; its interfaces: %s)" % (
                host["name"], "--network-interfaces " + ",".join(wanted) if wanted else "any but loopback",
                listed))
        missed = {}
        for name, addr in tried:
            missing = [hosts[i]["name"] for i in others if (index, name, addr) not in reached.get(i, set())]
            if not missing:
                order = "in the order of --network-interfaces" if wanted else (
                    "its default route's interface" if name == host.get("default") else "in the kernel's order")
                skipped = "; ".join("%s %s unreached from %s" % (n, a, ", ".join(m)) for (n, a), m in missed.items())
                why = "reached from every other host, %s%s" % (order, " (%s)" % skipped if skipped else "")
                choices.append(Choice(name, addr, why))
                break
            missed[(name, addr)] = missing
        else:
            raise NetworkError("host %s: no interface reached from every other host (tried %s)" % (
                host["name"], "; ".join("%s %s: unreached from %s" % (n, a, ", ".join(m))
                                        for (n, a), m in missed.items())))
    return choices
