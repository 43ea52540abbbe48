"""Hosts and their slots, as Horovod's users write them, and where each rank
goes: `-H a:4,b:4`, a hostfile (`a slots=4` a line, `#` comments), and the
placement of -np ranks filling hosts in the order given.

Standard library only (kolorun loads the runner without kolo's library)."""
import ipaddress
import socket
from collections import namedtuple

# What one rank is told about where it runs (Horovod's definitions): its
# local rank and size among the ranks of its host, and its cross rank and
# size among the ranks of every host that share its local rank.
Placement = namedtuple("Placement", "rank host local_rank local_size cross_rank cross_size")


class HostsError(ValueError):
    """A -H list or hostfile that cannot be used; says which entry and why."""


def _slots(text, entry, where):
    if not text.isdigit() or int(text) < 1:
        raise HostsError("%s: %r: slots must be a whole number of at least 1, got %r" % (where, entry, text))
    return int(text)


def _check_name(name, entry, where):
    if not name or any(c.isspace() for c in name) or name.startswith("-"):
        raise HostsError("%s: %r: not a host name" % (where, entry))


def parse_hosts(text, default_slots=1, where="-H", strict=True):
    """'a:2,b' (or the same a line) -> [(host, slots)] in the order given.

    strict (a fixed job's -H): a host named twice is an error naming it, as
    a malformed entry is. Not strict (an elastic job's discovery script,
    which is polled and may repeat itself): a later line of a host adds
    nothing."""
    hosts, seen = [], set()
    for item in text.replace(",", "\n").splitlines():
        item = item.strip()
        if not item or item.startswith("#"):
            continue
        if item.startswith("["):  # [IPv6]:slots
            name, _, rest = item[1:].partition("]")
            slots = rest[1:] if rest.startswith(":") else rest
        elif item.count(":") == 1:
            name, _, slots = item.partition(":")
        else:  # a name, or an IPv6 address alone
            name, slots = item, ""
        _check_name(name, item, where)
        count = _slots(slots, item, where) if slots else default_slots
        if name in seen:
            if strict:
                raise HostsError("%s: host %s is listed twice; give it once with all its slots" % (where, name))
            continue
        seen.add(name)
        hosts.append((name, count))
    return hosts


def read_hostfile(path):
    """Horovod's (and Open MPI's) hostfile: `host slots=N` a line (`host`
    alone: 1 slot), `#` starts a comment."""
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise HostsError("--hostfile %s: %s" % (path, e.strerror or e))
    hosts, seen = [], set()
    for number, line in enumerate(lines, 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        where = "--hostfile %s line %d" % (path, number)
        fields = line.split()
        name, count = fields[0], 1
        _check_name(name, line, where)
        for field in fields[1:]:
            key, eq, value = field.partition("=")
            if key in ("slots", "max_slots", "max-slots") and eq:
                if key == "slots":
                    count = _slots(value, line, where)
            else:
                raise HostsError("%s: %r: expected `host slots=N`" % (where, line))
        if name in seen:
            raise HostsError("%s: host %s is listed twice" % (where, name))
        seen.add(name)
        hosts.append((name, count))
    if not hosts:
        raise HostsError("--hostfile %s: no hosts in it" % path)
    return hosts


def place(np, hosts):
    """The ranks 0..np-1 on hosts [(host, slots)], filling each host's
    slots in order before the next (as horovodrun and mpirun --map-by slot
    do). More ranks than slots is an error that says how many there are."""
    total = sum(slots for _, slots in hosts)
    if np > total:
        raise HostsError("-np %d is more ranks than the %d slots of %s" %
                         (np, total, ",".join("%s:%d" % h for h in hosts)))
    host_of_rank = [host for host, slots in hosts for _ in range(slots)][:np]
    return describe(host_of_rank)


def describe(host_of_rank):
    """Each rank's Placement, given the host of every rank (in any order:
    a host's ranks are its local ranks 0.. in rank order)."""
    order = list(dict.fromkeys(host_of_rank))  # hosts in the order of their first rank
    count = {host: host_of_rank.count(host) for host in order}
    placements = []
    for rank, host in enumerate(host_of_rank):
        local_rank = host_of_rank[:rank].count(host)
        # The hosts with a rank at this local rank are those with more ranks
        # than it; this host's place among them is its cross rank.
        sharing = [h for h in order if count[h] > local_rank]
        placements.append(Placement(rank, host, local_rank, count[host], sharing.index(host), len(sharing)))
    return placements


def local_addresses():
    """This machine's (this network namespace's) IPv4 addresses."""
    from .supervisor import ipv4_interfaces  # what each host reports of itself
    return {addr for _, addr in ipv4_interfaces()} | {"127.0.0.1"}


def resolves(host):
    """Whether `host` is an address or a name this machine resolves."""
    try:
        socket.getaddrinfo(host, None)
        return True
    except (OSError, UnicodeError):
        return False


def is_local(host, addresses=None):
    """Whether `host` names this machine (started without ssh): localhost,
    its host name, or a name that resolves to one of its addresses."""
    if host in ("localhost", "127.0.0.1", "::1", socket.gethostname()):
        return True
    addresses = local_addresses() if addresses is None else addresses
    try:
        ipaddress.ip_address(host)
        return host in addresses
    except ValueError:
        pass
    try:
        resolved = {info[4][0] for info in socket.getaddrinfo(host, None, socket.AF_INET)}
    except (OSError, UnicodeError):
        return False  # unresolvable here: ssh will say so for that host
    return bool(resolved) and (resolved <= addresses or any(a.startswith("127.") for a in resolved))
