"""The system ``ace replay`` picks when given none: the default ring unless the trace's
algorithm needs links it lacks, then the smallest named system that has them, or an error
naming the system-file keys to write."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from ace.errors import ConfigError
from sim_harness.systems import NAMED_SYSTEMS, load_system, pick_system
from sim_harness.trace import SystemHints
from sim_harness.traces import folding_notes, load_trace
from testbench.replay_checks import collective_spec, trace_of

DATA = Path(__file__).resolve().parent / "data" / "msccl"
RING = Path("/work/shared/data/msccl/ring_allreduce_8npus.xml")


def _allpairs_xml(p: int, instances: int) -> str:
    spec = importlib.util.spec_from_file_location("msccl_generate", DATA / "generate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.allpairs(p, instances).xml()


def test_new_named_systems_have_a_link_per_peer():
    for name, kind in (("full8", "fully_connected"), ("switch8", "switch")):
        system = load_system(name)
        assert system.topology.kind == kind and system.topology.num_nodes == 8
        assert system.config.num_links == 7 == system.topology.num_links
        assert system.config.replace(name="x", num_links=2) == \
            load_system("ring8").config.replace(name="x")


def test_a_ring_algorithm_keeps_the_default_ring():
    choice = pick_system(load_trace(RING))
    assert str(choice.system.topology) == "torus:8" and choice.name is None
    assert choice.describe() is None


@pytest.mark.parametrize("name", ["allpairs_allreduce_8gpus_2ch.xml",
                                  "hierarchical_allreduce_2x4gpus.xml",
                                  "ring_allreduce_8gpus_4chperring_LL.xml"])
def test_an_algorithm_needing_more_links_gets_full8(name):
    trace = load_trace(DATA / name)
    choice = pick_system(trace)
    assert choice.name == "full8" and choice.system == load_system("full8")
    text = choice.describe()
    assert "ring:8 lacks links" in text and "full8 (fully_connected:8, engine harness7)" in text
    assert "is not a neighbour" in text
    assert folding_notes(trace, choice.system.config.num_channels) == [
        f"{DATA / name}: " + trace.collectives[0].extra["thread_blocks"].__str__()
        + f" thread blocks per GPU on 4 channels: up to "
        f"{-(-trace.collectives[0].extra['thread_blocks'] // 4)} thread blocks share a "
        "channel (folded)"]


def test_a_compiled_direct_collective_needing_links_gets_full8():
    trace = trace_of(collective_spec("ar", "allreduce", 4096, algorithm="direct"))
    trace.nodes = 8
    assert pick_system(trace).name == "full8"
    trace.collectives[0] = collective_spec("ar", "allreduce", 4096, algorithm="ring")
    assert pick_system(trace).name is None


def test_the_trace_topology_is_kept_with_its_named_engine():
    trace = load_trace(DATA / "allpairs_allreduce_8gpus_2ch.xml")
    trace.system = SystemHints(topology="switch:8")
    choice = pick_system(trace)
    assert choice.name == "switch8" and choice.system == load_system("switch8")
    assert choice.describe() is None
    trace.system = SystemHints(topology="ring:4")
    assert pick_system(trace).system == load_system("ring4")


def test_no_named_system_fits_names_the_keys(tmp_path):
    path = tmp_path / "allpairs6.xml"
    path.write_text(_allpairs_xml(6, 1))
    assert not any(load_system(n).topology.num_nodes == 6 for n in NAMED_SYSTEMS)
    with pytest.raises(ConfigError, match=r'topology = "fully_connected:6" \(or "switch:6"\) '
                                          r'and config = \{ base = "small", num_links = 5 \}'):
        pick_system(load_trace(path))
