"""The Python mirror of kolo_config_t and the layers of settings: each rank
makes a communicator of its own (one rank) and asks it what it settled on."""
import ctypes

import pytest

from kolo._library import CONFIG_UNSET_DOUBLE, CONFIG_UNSET_INT, Config, UniqueId, check, config_fields, lib


def test_the_mirror_has_every_field_the_library_lists_at_its_offset():
    names = [row[0] for row in config_fields]
    assert names[0] == "timeout_s" and "interface_name" in names and "defaults" in names
    for name, kind, offset, *_ in config_fields:
        assert getattr(Config, name).offset == int(offset)
    c = Config.unset()
    assert c.size == ctypes.sizeof(Config) and c.version == Config.config_version >= 2
    for name, kind, *_ in config_fields:
        expected = {"int64": CONFIG_UNSET_INT, "double": CONFIG_UNSET_DOUBLE, "string": None, "config": None}[kind]
        assert getattr(c, name) == expected, name


def timeout_of(config):
    ident, comm = UniqueId(), ctypes.c_void_p()
    check(lib.kolo_get_unique_id(ctypes.byref(ident)))
    check(lib.kolo_comm_init_rank(ctypes.byref(comm), 1, ctypes.byref(ident), 0, ctypes.byref(config)))
    seconds = ctypes.c_double()
    check(lib.kolo_comm_get_timeout(comm, ctypes.byref(seconds)))
    lib.kolo_comm_destroy(comm)
    return seconds.value


@pytest.mark.parametrize("variable", [None, "41"])
def test_defaults_lie_under_the_environment_and_fields_over_it(monkeypatch, variable):
    if variable is None:
        monkeypatch.delenv("KOLO_TIMEOUT_S", raising=False)
    else:
        monkeypatch.setenv("KOLO_TIMEOUT_S", variable)
    c = Config.sharing_cores()
    c.defaults_config.timeout_s = 17
    assert timeout_of(c) == (17 if variable is None else 41)
    c.timeout_s = 23
    assert timeout_of(c) == 23
