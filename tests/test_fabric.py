"""The fabric in parts (``sim_harness.fabric``): the generated top has exactly the ports of
``AceSystem``'s driver fabric, drives every engine input once (a peer's link end, a node
module, or a tie-off for unused links), and is chosen only where ``AceSystem`` cannot be
converted (more than 2**16 port bits). Cycle-for-cycle equality with ``AceSystem`` on the RTL:
docs/harness.md (torus4x4) and ``tests/test_systems_rtl.py::test_torus4x4x4``."""

from __future__ import annotations

import re

import pytest

from sim_harness.fabric import (AMARANTH_PORT_BITS, _top_ports, fabric_port_bits,
                                fabric_sources, system_sources)
from sim_harness.system import link_partners
from sim_harness.systems import load_system

DECL = re.compile(r"^  (input|output) (?:\[(\d+):0\] )?(\w+)$")


def _top(spec):
    text = fabric_sources(spec)[f"{spec.name}.v"]
    head = text[:text.index(");")]
    ports = [DECL.match(line.rstrip(",")) for line in head.splitlines()[2:]]
    return text, [(m[3], m[1] == "input", int(m[2] or 0) + 1) for m in ports]


@pytest.mark.parametrize("topology", ["ring:3", "torus:2x2"])
def test_top_has_the_fabric_ports_and_drives_each_engine_input_once(topology):
    spec = load_system("torus4x2", topology=topology)
    text, ports = _top(spec)
    assert ports[:2] == [("clk", True, 1), ("rst", True, 1)]
    assert ports[2:] == _top_ports(spec)
    outputs = [name for name, is_input, _ in ports if not is_input]
    for name in outputs:
        drivers = len(re.findall(rf"assign {name} =", text)) + len(
            re.findall(rf"\({name}\)", text))
        assert drivers == 1, name
    # Every link's far end reaches the peer's receive port; unused links are tied off.
    partners = link_partners(spec.topology)
    for (node, link), (peer, peer_link) in partners.items():
        assert f"assign n{peer}_rx{peer_link}__tdata = w{node}_out{link}__tdata;" in text
    unused = [(k, l) for k in range(spec.topology.num_nodes)
              for l in range(spec.config.num_links) if (k, l) not in partners]
    assert bool(unused) == (topology == "ring:3")       # a ring uses 2 of the 4 links
    for k, l in unused:
        assert f"assign n{k}_rx{l}__tvalid = 1'd0;" in text


def test_parts_only_where_amaranth_cannot_convert_the_whole():
    big, small = load_system("torus4x4x4"), load_system("ring4")
    per_node = fabric_port_bits(load_system("torus3x3x3")) // 27
    assert fabric_port_bits(big) == 64 * per_node > AMARANTH_PORT_BITS
    assert fabric_port_bits(small) <= AMARANTH_PORT_BITS
    assert "ace_system_harness_torus4_node0" not in system_sources(small)[f"{small.name}.v"]
    with pytest.raises(ValueError, match="only driver builds of torus and fully connected"):
        fabric_sources(load_system("switch4"))
