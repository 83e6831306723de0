"""Scoreboard of harness replays (``sim_harness.replay``): every check a replayed collective
must pass, against the golden model and against the bytes the models counted; and small
builders of test traces. Shared by the harness tests of every system."""

from __future__ import annotations

from sim_harness.trace import CollectiveSpec, Trace
from testbench.accounting import documented_bytes

__all__ = ["trace_of", "collective_spec", "check_replay"]


def trace_of(*specs) -> Trace:
    """A trace of the given collectives (``format="ace"``)."""
    return Trace(path="<test>", format="ace", collectives=list(specs))


def collective_spec(name, collective, nbytes, dtype="fp32", op="sum", algorithm="ring"):
    """One collective of ``nbytes`` per node."""
    return CollectiveSpec(name=name, collective=collective, bytes=nbytes, dtype=dtype, op=op,
                          algorithm=algorithm, source="test")


def check_replay(raw, system):
    """Bit-exact, counters equal to the golden model's and to the mode's documented memory
    accounting (:mod:`testbench.accounting`), sampled memory-model bytes equal to the engines'
    counters, link payload as the program plans."""
    where = f"{raw['name']} ({raw['mode']}, seed {raw['seed']})"
    assert raw["correct"], f"{where}: output differs from the golden model"
    assert raw["mem_read_bytes"] == raw["golden_mem_read_bytes"], where
    assert raw["mem_write_bytes"] == raw["golden_mem_write_bytes"], where
    for k, node in enumerate(raw["steps"]):     # the mode's documented accounting, per node
        documented = documented_bytes(raw["mode"], [tuple(st) for ch in node for st in ch])
        measured = (raw["mem_read_bytes"][k], raw["mem_write_bytes"][k])
        assert measured == documented, f"{where}: node {k} memory read/written {measured}, " \
            f"documented {documented}"
    # The memory model counts whole read beats (a read of 4 bytes costs a 16-byte beat) and
    # written bytes by strobe, so its writes equal the engine's and its reads are no fewer.
    model = raw["samples"]
    assert model["mem_write_bytes"][-1] == raw["mem_write_bytes"], where
    assert all(m >= e for m, e in zip(model["mem_read_bytes"][-1], raw["mem_read_bytes"]))
    assert raw["link_tx_payload_bytes"] == raw["program_link_bytes"], where
    _check_wire(raw, system.config.link_bytes, where)
    steps = [[len(ch) for ch in node] for node in raw["steps"]]
    assert raw["samples"]["steps_done"][-1] == [
        n + [0] * (system.config.num_channels - len(n)) for n in steps], where


def _check_wire(raw, link_bytes: int, where: str) -> None:
    """Every link's wire bytes (the link model's count) are its payload plus its header beats
    (the NIC's two counters), and the header beats are one per DATA packet the program sends
    on it plus the CREDIT packets returning what it receives: none on a link that receives
    nothing, at most one per payload beat received."""
    for k, links in enumerate(raw["link_tx_wire_bytes"]):
        for l, wire in enumerate(links):
            at = f"{where}: node {k} link {l}"
            payload = raw["link_tx_payload_bytes"][k][l]
            header = raw["link_tx_header_bytes"][k][l]
            assert wire == payload + header, f"{at}: wire {wire} != {payload} + {header}"
            assert header % link_bytes == 0, f"{at}: header bytes {header}"
            credits = header // link_bytes - raw["program_link_packets"][k][l]
            received = raw["program_link_rx_beats"][k][l]
            assert 0 <= credits <= received, f"{at}: {credits} credit packets for {received} " \
                "payload beats received"
