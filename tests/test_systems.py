"""System balance as data (``sim_harness.systems``): named systems and system files set link
bandwidth, memory bandwidth (or the ratio of the two), the memory port width, links per node,
latencies and bidirectional rings; bad values name the file, the key and the allowed range."""

from __future__ import annotations

import json

import pytest

from ace.errors import ConfigError
from sim_harness.simulator import build_key
from sim_harness.system import SystemSpec
from sim_harness.systems import HARNESS_CONFIG, NAMED_SYSTEMS, SYSTEM_KEYS, load_system


def _file(tmp_path, text: str, suffix=".toml"):
    path = tmp_path / f"system{suffix}"
    path.write_text(text)
    return str(path)


def test_named_systems():
    for name in NAMED_SYSTEMS:
        system = load_system(name)
        assert isinstance(system, SystemSpec) and system.host == "driver"
        assert system.config.num_links >= system.topology.num_links
    torus = load_system("torus4x4x4")
    assert str(torus.topology) == "torus:4x4x4" and torus.topology.num_nodes == 64
    assert torus.config.num_links == 6 and torus.config.name == "harness6"
    assert torus.config.replace(name="x", num_links=2) == HARNESS_CONFIG.replace(name="x")
    bi, ring = load_system("ring8bi"), load_system("ring8")
    assert bi.bidirectional and not ring.bidirectional and bi.topology == ring.topology
    # A loader and 3 channels per direction, 16 banks for their 14 SRAM read ports.
    assert (bi.config.num_channels, bi.config.sram_banks) == (7, 16)
    assert bi.config.replace(name="x", num_channels=4, sram_banks=8) == \
        HARNESS_CONFIG.replace(name="x")
    # The default balance: 16-byte links at full rate, 32 bytes of memory per cycle.
    assert (ring.link_rate, ring.mem_rate, ring.mem_ratio) == (16, 32, 2)


def test_every_key_in_a_file(tmp_path):
    path = _file(tmp_path, """
        config = "harness"
        topology = "torus:4x4"
        link_bytes_per_cycle = 4
        link_latency = 100
        mem_ratio = 6
        mem_port_bytes = 64
        links_per_node = 6
        mem_latency = 50
        mem_bytes = 16777216
        bidirectional = true
    """)
    system = load_system(path)
    assert set(SYSTEM_KEYS) == {"config", "topology", "link_bytes_per_cycle", "link_latency",
                                "mem_bytes_per_cycle", "mem_ratio", "mem_port_bytes",
                                "links_per_node", "mem_latency", "mem_bytes", "bidirectional"}
    assert system.link_rate == 4 and system.link_bytes_per_cycle == 4
    assert system.mem_rate == 24 and system.mem_ratio == 6          # 6 x 4 bytes per cycle
    assert system.config.mem_bytes == 64 and system.config.num_links == 6
    assert system.config.name == "harness_links6"                   # its own engine build
    assert (system.link_latency, system.mem_latency, system.mem_bytes) == (100, 50, 16 << 20)
    assert system.run_algorithm("ring") == "bidirectional_ring"
    assert system.run_algorithm(("ring", "direct")) == ("bidirectional_ring", "direct")
    assert system.run_algorithm(["RING"]) == ["bidirectional_ring"]
    # Rates, latencies and the algorithms are run-time choices: the same build as the same
    # engine, fabric and memory size (one build serves a ring run both ways and one way).
    plain = load_system(_file(tmp_path, 'topology = "torus:4x4"\nlinks_per_node = 6\n'
                              'mem_bytes = 16777216\n', ".plain.toml"))
    assert build_key(system) == build_key(plain)
    assert plain.run_algorithm("ring") == "ring" and plain.link_rate == 16


def test_json_file_and_explicit_memory_rate(tmp_path):
    path = _file(tmp_path, json.dumps({"topology": "ring:4", "mem_bytes_per_cycle": 12.5,
                                       "link_bytes_per_cycle": 2.5}), ".json")
    system = load_system(path)
    assert (system.mem_rate, system.link_rate, system.mem_ratio) == (12.5, 2.5, 5)


def test_overrides_replace_a_systems_keys_and_are_checked_like_a_file(tmp_path):
    system = load_system("ring8", overrides={"mem_ratio": 6, "mem_bytes": 1 << 30})
    assert (system.mem_rate, system.mem_ratio, system.mem_bytes) == (96, 6, 1 << 30)
    assert system.config == load_system("ring8").config
    # A rate override replaces the file's other rate key instead of clashing with it.
    path = _file(tmp_path, "mem_bytes_per_cycle = 20\n")
    assert load_system(path, overrides={"mem_ratio": 3}).mem_rate == 48
    assert load_system(path, overrides={"mem_bytes_per_cycle": 24}).mem_rate == 24
    with pytest.raises(ConfigError, match=r"system ring8 with mem_ratio = 9: mem_ratio: 9 is "
                                          r"out of range; allowed: a number from .* to 8 "):
        load_system("ring8", overrides={"mem_ratio": 9})


def test_memory_port_width_passes_through(tmp_path):
    """The harness's own port (4 x the link) keeps its engine; 1x and 2x reach the
    configuration's ``mem_bytes`` under a name of their own (their own builds); the default
    memory bandwidth stays 2 x the link rate whatever the port."""
    assert HARNESS_CONFIG.mem_bytes == 4 * HARNESS_CONFIG.link_bytes
    assert load_system(_file(tmp_path, "mem_port_bytes = 64\n")).config == HARNESS_CONFIG
    for port in (16, 32):
        system = load_system(_file(tmp_path, f"mem_port_bytes = {port}\n"))
        assert system.config.mem_bytes == port and system.config.name == f"harness_port{port}"
        assert system.mem_rate == 32
    system = load_system(_file(tmp_path, "mem_port_bytes = 32\nmem_bytes_per_cycle = 64\n"))
    assert system.mem_rate == 64


@pytest.mark.parametrize("text, message", [
    ("link_bytes_per_cycle = 17", "link_bytes_per_cycle: 17 is out of range; allowed: a number "
                                  "from 0.00390625 to 16 bytes per cycle (the link's beat "
                                  "width link_bytes = 16)"),
    ("link_bytes_per_cycle = 0", "link_bytes_per_cycle: 0 is out of range"),
    ('link_bytes_per_cycle = "fast"', "link_bytes_per_cycle: 'fast' is out of range"),
    ("mem_ratio = 9", "mem_ratio: 9 is out of range; allowed: a number from 0.000244141 to 8 "
                      "(memory bytes per cycle per link byte per cycle per direction: mem_ratio "
                      "x link_bytes_per_cycle (16) is the memory bandwidth, at most 2 x "
                      "mem_port_bytes = 128)"),
    ("mem_ratio = 17\nlink_bytes_per_cycle = 8", "mem_ratio: 17 is out of range; allowed: a "
                                                 "number from 0.000488281 to 16 "),
    ("mem_ratio = -1", "mem_ratio: -1 is out of range"),
    ("mem_ratio = 2\nmem_bytes_per_cycle = 32", "mem_bytes_per_cycle and mem_ratio both given; "
                                                "allowed: one of them"),
    ("mem_bytes_per_cycle = 129", "mem_bytes_per_cycle: 129 is out of range; allowed: a number "
                                  "from 0.00390625 to 128 bytes per cycle (2 x mem_port_bytes = "
                                  "128)"),
    ("mem_port_bytes = 24", "mem_port_bytes: 24 is not allowed; allowed: 16, 32 or 64 bytes "
                            "(1, 2 or 4 x link_bytes = 16)"),
    ("mem_port_bytes = true", "mem_port_bytes: True is not allowed"),
    ('topology = "torus:4x4"\nlinks_per_node = 2', "links_per_node: 2 is out of range; allowed: "
                                                  "an integer from 4 to 16 (torus:4x4 needs 4 "
                                                  "links per node)"),
    ("links_per_node = 17", "links_per_node: 17 is out of range"),
    ("links_per_node = 2.0", "links_per_node: 2.0 is out of range; allowed: an integer"),
    ("link_latency = 0", "link_latency: 0 is out of range; allowed: an integer from 1 to 255 "
                         "cycles"),
    ("mem_latency = 127", "mem_latency: 127 is out of range; allowed: an integer from 2 to 126 "
                          "cycles"),
    ("mem_bytes = 1024", "mem_bytes: 1024 is out of range; allowed: an integer from 65536 to "
                         "4294967296 bytes"),
    ("bidirectional = 1", "bidirectional: 1; allowed: true or false"),
    ('topology = "switch:4"\nconfig = "small"\nbidirectional = true\nlinks_per_node = 3',
     "bidirectional: true needs a ring or torus topology; switch:4 has no ring"),
    ("bandwidth = 3", "unknown key 'bandwidth'; allowed: config, topology, link_bytes_per_cycle"),
])
def test_bad_values_name_file_key_and_range(tmp_path, text, message):
    path = _file(tmp_path, text + "\n")
    with pytest.raises(ConfigError) as error:
        load_system(path)
    assert str(error.value).startswith(f"{path}: "), error.value
    assert message in str(error.value), error.value
