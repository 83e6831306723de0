"""Replay a trace on the RTL system: run each collective on the Verilated engines in ACE mode
and/or the baselines (``staged``, ``p2p``; :class:`~ace.vocab.Mode`), check every node's
result against the golden model and return the raw measurements (:mod:`sim_harness.metrics`
turns them into the reported figures).

The pre-flight (:func:`sim_harness.preflight.preflight`) first compiles and assembles every
collective once per mode and checks that it fits the system. Then, per collective and mode
(:func:`run_collective`): make random inputs from a seed, run the golden model on the same
program, load the input images into the memory models (no simulated cycles), load the
assembled programs through the CSRs (all nodes at once), start every engine in the same cycle,
run until every engine interrupts (sampling the memory and link counters and each channel's
STEPS_DONE every ``interval`` cycles), read the engine counters and the outputs back, and
compare.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ace.flow.toolchain import check_waves_toolchain
from ace.hw.engine import counter_names
from ace.layouts import DTYPE_BYTES, Dtype
from ace.numerics import BITS_DTYPE, NP_DTYPE
from ace.regmap import steps_done_offset
from ace.sw import golden
from ace.sw.program import link_traffic
from ace.vocab import Mode

from .metrics import latency_steps
from .preflight import (CollectiveTooLarge, Plan, PreparedCollective, ReplayError, compile_spec,
                        preflight, prepare)
from .speed import expected_cycles
from .simulator import SystemSimulator, build_driver, run_hosts
from .system import SystemSpec
from .trace import CollectiveSpec, Trace, scale_trace

__all__ = ["ReplayError", "CollectiveTooLarge", "compile_spec",
           "make_inputs", "replay", "run_collective", "scale_trace", "system_record"]

#: Engine watchdog (TIMEOUT CSR): a channel that sees no progress anywhere in its engine for
#: this many cycles stops with the TIMEOUT error, so a hang ends as a reported error.
WATCHDOG_CYCLES = 200_000


def make_inputs(rng: np.random.Generator, dtype: Dtype, count: int) -> np.ndarray:
    """Training-like data as bit patterns: normal values for the float dtypes (rounded to
    ``dtype``), moderate integers for int32."""
    if dtype == Dtype.INT32:
        return rng.integers(-(1 << 20), 1 << 20, size=count, dtype=np.int32).view(np.uint32)
    values = rng.standard_normal(count).astype(np.float32)
    return values.astype(NP_DTYPE[dtype]).view(BITS_DTYPE[dtype])


def _algorithm_name(program) -> str:
    alg = program.algorithm
    return alg if isinstance(alg, str) else "_".join(alg)


def _latency_steps(spec, program, system: SystemSpec) -> int:
    if spec.collective == "msccl" or spec.extra.get("span"):
        # The longest chain of communicating steps in any channel (MSCCL; group collectives,
        # whose formula would be for the whole system, sim_harness/groups.py).
        return max(sum(1 for s in ch.steps if {"send", "recv"} & s.uses)
                   for node in program.nodes for ch in node.channels)
    return latency_steps(program.collective, program.algorithm, str(system.topology))


def system_record(spec: SystemSpec, background_share: float = 0.0) -> dict:
    cfg = spec.config
    return {"config": cfg.to_dict(), "topology": str(spec.topology), "nodes":
            spec.topology.num_nodes, "clock_mhz": cfg.clock_mhz,
            "link_bytes_per_cycle": float(spec.link_rate), "link_latency": spec.link_latency,
            "mem_bytes_per_cycle": float(spec.mem_rate),
            "mem_latency": spec.mem_latency, "mem_bytes": spec.mem_bytes,
            "background_share": background_share}


def run_collective(sim: SystemSimulator, prepared: PreparedCollective, *, seed: int,
                   interval: int, progress=None) -> dict:
    """Run one prepared collective (:func:`~sim_harness.preflight.prepare`) on ``sim``, a
    simulator of ``prepared``'s system, with inputs from ``seed``; sample every ``interval``
    cycles, call ``progress(cycles so far)`` between slices; return the raw measurements.
    An engine error or a run that does not finish raises :class:`ReplayError`."""
    spec, mode, program = prepared.spec, prepared.mode, prepared.program
    system = sim.spec
    rng = np.random.default_rng(seed)
    inputs = [make_inputs(rng, program.dtype, node.in_elems) for node in program.nodes]
    expect = golden.run(program, inputs)
    hosts = _load_and_start(sim, prepared, golden.place_inputs(program, inputs),
                            max(len(im) for im in expect.memory))
    start_cycle = sim.cycle
    samples, done, elapsed = _run_until_done(sim, prepared, interval, progress)
    statuses = run_hosts(sim, [h.status() for h in hosts])
    counters = run_hosts(sim, [h.counters() for h in hosts])
    errors = [f"node {k}: {hosts[k].describe_error(st)}" for k, st in enumerate(statuses)
              if st["error"]]
    if errors or not done:
        raise ReplayError(f"{spec.name} ({mode}): " + ("; ".join(errors) if errors else
                          f"not done after {elapsed} cycles"))
    esize = DTYPE_BYTES[program.dtype]
    correct = True
    for k, node in enumerate(program.nodes):
        n = node.out_elems * esize
        got = sim.dump(k, node.output_addr, n)
        want = expect.memory[k][node.output_addr:node.output_addr + n].tobytes()
        correct &= got == want
    cycles = max(c["cycles"] for c in counters)
    return {**_run_record(prepared, system, seed, start_cycle, cycles, correct),
            "golden_mem_read_bytes": list(expect.mem_read_bytes),
            "golden_mem_write_bytes": list(expect.mem_write_bytes),
            **_counter_record(counters, samples, sim.links, system.config.num_links, interval)}


def _load_and_start(sim: SystemSimulator, prepared: PreparedCollective, images, top: int):
    """Load the input images and the programs, start every engine; return the hosts."""
    cfg = sim.spec.config
    for k, image in enumerate(images):
        padded = np.zeros(-(-top // 4) * 4, np.uint8)
        padded[:len(image)] = image
        sim.load(k, 0, padded.tobytes())
    hosts = sim.hosts(cfg, counter_names(cfg))

    async def load(host, node):
        await host.load_program(node, stage_base=prepared.stage_base)
        await host.set_irq_enable(done=True, error=True)
        await host.set_timeout(WATCHDOG_CYCLES)
        await host.clear_counters()

    run_hosts(sim, [load(h, n) for h, n in zip(hosts, prepared.assembled.nodes)])
    sim.flush()
    run_hosts(sim, [h.start() for h in hosts])
    sim.flush()
    return hosts


def _run_until_done(sim: SystemSimulator, prepared: PreparedCollective, interval: int, progress):
    """Run in slices (so a progress bar can move) until every engine interrupts or the
    budget runs out; ``(samples, done, cycles)``, samples continuing across slices."""
    cfg, p = sim.spec.config, prepared.program.num_nodes
    budget = 100_000 + 200 * (prepared.program.bytes_per_node // cfg.link_bytes + 1) * max(1, p)
    regs = [steps_done_offset(c) for c in range(cfg.num_channels)]
    start_cycle = sim.cycle
    samples, done, elapsed = [], False, 0
    while not done and elapsed < budget:
        piece = sim.run(timeout=min(1 << 16, budget - elapsed), interval=interval,
                        registers=regs)
        for s in piece["samples"]:
            if not samples or s["cycle"] > samples[-1]["cycle"]:
                samples.append(s)
        done = piece["done"]
        elapsed = piece["cycle"] - start_cycle
        if progress:
            progress(elapsed)
    return samples, done, elapsed


def _run_record(prepared: PreparedCollective, system: SystemSpec, seed: int, start_cycle: int,
                cycles: int, correct: bool) -> dict:
    """What the raw record says about the collective and its program."""
    spec, program = prepared.spec, prepared.program
    msccl = spec.collective == "msccl"
    links = link_traffic(program)
    p, L = program.num_nodes, system.config.num_links
    return {
        "name": spec.name, "collective": "msccl" if msccl else program.collective,
        "msccl_coll": getattr(program, "collective", None),
        "algorithm": "msccl" if msccl else _algorithm_name(program),
        "msccl_algorithm": program.algorithm if msccl else None,
        "topology": str(system.topology), "nodes": p,
        "bytes": program.bytes_per_node, "dtype": spec.dtype, "op": spec.op,
        "mode": prepared.mode, "chunks": program.chunks, "seed": seed,
        "start_cycle": start_cycle, "end_cycle": start_cycle + cycles, "cycles": cycles,
        "links_used": sorted([k, l] for (k, d, l) in links if d == "tx"),
        "program_link_bytes": [[links.get((k, "tx", l), 0) for l in range(L)]
                               for k in range(p)],
        **_program_packets(program, system.config),
        "latency_steps": _latency_steps(spec, program, system),
        "correct": bool(correct),
        "steps": [[[[st.type, st.nbytes] for st in ch.steps] for ch in node.channels]
                  for node in program.nodes],
    }


def _program_packets(program, config) -> dict:
    """Per node and link, the DATA packets the program sends (a step's message cut into
    ``packet_bytes`` packets, the last shorter) and the payload beats it receives (each
    packet's payload in ``link_bytes`` beats): what the headers and credits on the wire follow
    from."""
    P, lb, L = config.packet_bytes, config.link_bytes, config.num_links
    packets = [[0] * L for _ in program.nodes]
    beats = [[0] * L for _ in program.nodes]
    for k, node in enumerate(program.nodes):
        for step in (s for ch in node.channels for s in ch.steps):
            full, rest = divmod(step.nbytes, P)
            if "send" in step.uses:
                packets[k][step.send_link] += full + (rest > 0)
            if "recv" in step.uses:
                beats[k][step.recv_link] += full * -(-P // lb) + -(-rest // lb)
    return {"program_link_packets": packets, "program_link_rx_beats": beats}


def _counter_record(counters, samples, links, num_links: int, interval: int) -> dict:
    """What the raw record says about the engines' counters and the sampled model counters."""
    p, L, base = len(counters), num_links, samples[0]
    return {
        "mem_read_bytes": [c["mem_read_bytes"] for c in counters],
        "mem_write_bytes": [c["mem_write_bytes"] for c in counters],
        "link_tx_payload_bytes": [[c[f"link{l}_tx_payload_bytes"] for l in range(L)]
                                  for c in counters],
        "link_tx_header_bytes": [[c[f"link{l}_tx_header_bytes"] for l in range(L)]
                                 for c in counters],
        "link_tx_wire_bytes": [[_wire(samples, links, k, l, base) for l in range(L)]
                               for k in range(p)],
        "samples": {
            "interval": interval, "cycle": [s["cycle"] for s in samples],
            "mem_read_bytes": [[v - b for v, b in zip(s["mem_read_bytes"],
                                                      base["mem_read_bytes"])] for s in samples],
            "mem_write_bytes": [[v - b for v, b in zip(s["mem_write_bytes"],
                                                       base["mem_write_bytes"])]
                                for s in samples],
            "link_wire_bytes": [[[_link(s, links, k, l) - _link(base, links, k, l)
                                  for l in range(L)] for k in range(p)] for s in samples],
            "steps_done": [s["registers"] for s in samples]},
    }


def _link(sample, links, node, link) -> int:
    try:
        return sample["link_bytes"][links.index((node, link))]
    except ValueError:
        return 0


def _wire(samples, links, node, link, base) -> int:
    return _link(samples[-1], links, node, link) - _link(base, links, node, link)


def build_system(system: SystemSpec, *, waves: bool = False, pgo: bool = False,
                 log=print) -> Path:
    """:func:`~sim_harness.simulator.build_driver`, with the training of a profile-guided
    build (``pgo``) when it needs one; return the driver executable."""
    return build_driver(system, waves=waves, pgo=pgo, train=_train_profile, log=log)


def _train_profile(spec: SystemSpec, exe: Path, log) -> None:
    """The profile of a ``pgo`` build: short all-reduce, reduce-scatter and all-gather replays
    of every mode on the instrumented driver ``exe``, each checked bit-exact (a build whose
    training went wrong is not kept). Not the 1 MiB all-reduce that ``ace bench-sim``
    measures."""
    if log:
        log(f"training {spec.name}'s profile-guided build")
    with SystemSimulator(spec, exe=exe) as sim:
        sim.speed_key = None            # an instrumented driver's speed says nothing
        sim.reset()
        for mode, collective, nbytes in (("ace", "allreduce", 256 << 10),
                                         ("ace", "reducescatter", 128 << 10),
                                         ("ace", "allgather", 128 << 10),
                                         ("staged", "allreduce", 64 << 10),
                                         ("p2p", "allreduce", 64 << 10)):
            spec_c = CollectiveSpec(name=f"train_{collective}", collective=collective,
                                    bytes=nbytes, source="pgo")
            raw = run_collective(sim, prepare(spec_c, spec, mode), seed=1, interval=1 << 14)
            if not raw["correct"]:
                raise ReplayError(f"profile training: {mode} {collective} of {nbytes} B "
                                  f"on {spec.name} was not bit-exact")


def replay(trace: Trace, system: SystemSpec, *, modes=tuple(Mode), seed: int = 1,
           interval: int | None = None, background_share: float = 0.0, waves: bool = False,
           waves_dir=None, log=print, progress: bool = True, parallel: bool = True,
           plan: Plan | None = None, pgo: bool = False) -> dict:
    """Run every collective of ``trace`` in every mode of ``modes`` (default: ACE and both
    baselines; aliases such as ``baseline`` accepted); return
    ``{"system": system_record, "runs": [{"mode", "raws": [raw...]}]}``.

    ``plan`` is the trace's pre-flight (:func:`~sim_harness.preflight.preflight`) on
    ``system`` for these modes, made here when not given; compile and size errors are raised
    before any build.

    ``waves`` records an FST waveform of each mode's whole run, ``waves_<mode>.fst`` in
    ``waves_dir`` (default: the waves build's folder), with a separate Verilator build.

    ``pgo``: run on the profile-guided build (:func:`~sim_harness.simulator.build_driver`),
    the same cycles and results, faster once built.

    With ``parallel`` each mode runs in its own simulator process at the same time (the modes
    are independent runs of the same system); results are identical either way."""
    from concurrent.futures import ThreadPoolExecutor

    modes = tuple(Mode(m) for m in modes)           # the alias "baseline" is "staged"
    if plan is None:
        plan = preflight(trace, system, modes)
    elif not plan.matches(trace, system, modes):
        raise ValueError("plan: made for another trace, system or modes")
    if log:
        for name, pieces in plan.pieces.items():
            log(f"{name}: runs as {pieces} back-to-back pieces (as one collective its programs "
                f"exceed program_words = {system.config.program_words})")
    if waves:
        check_waves_toolchain()
    exe = build_system(system, waves=waves, pgo=pgo, log=log)

    def run_mode(position: int, mode: str) -> dict:
        path = None
        if waves:
            where = Path(waves_dir) if waves_dir else exe.parent.parent
            where.mkdir(parents=True, exist_ok=True)
            path = where / f"waves_{mode}.fst"
        with SystemSimulator(system, waves=waves, waves_path=path, log=log, pgo=pgo,
                             exe=exe) as sim:
            sim.reset(background_share=background_share)
            raws = [_run_with_bar(sim, prepared, seed=seed + i, interval=interval,
                                  position=position if progress else None)
                    for i, prepared in enumerate(plan.collectives[mode])]
        out = {"mode": mode, "raws": raws}
        if waves:
            out["waves"] = str(sim.waves_path)
        return out

    if parallel and len(modes) > 1 and not waves:
        with ThreadPoolExecutor(len(modes)) as pool:
            runs = list(pool.map(run_mode, range(len(modes)), modes))
    else:
        runs = [run_mode(0, mode) for mode in modes]
    return {"system": system_record(system, background_share), "runs": runs}


def _run_with_bar(sim: SystemSimulator, prepared: PreparedCollective, *, seed: int,
                  interval: int | None, position: int | None) -> dict:
    """:func:`run_collective` with a progress bar at ``position`` (None: no bar) and the
    default sampling interval (about 256 samples of the collective's link time)."""
    from tqdm import tqdm

    step = interval or max(64, prepared.spec.bytes // sim.spec.config.link_bytes // 256)
    if position is None:
        return run_collective(sim, prepared, seed=seed, interval=step)
    # The bar's total is the expected cycles (sim_harness.speed), so it shows the simulated
    # cycles per second and an ETA; a run that outlasts the estimate extends it.
    with tqdm(total=expected_cycles(prepared, sim.spec, load=False), unit="cyc",
              unit_scale=True, leave=False, position=position,
              desc=f"{prepared.mode} {prepared.spec.name}") as bar:
        def advance(elapsed):
            if elapsed > bar.total:
                bar.total = int(1.1 * elapsed)
            bar.update(elapsed - bar.n)
        return run_collective(sim, prepared, seed=seed, interval=step, progress=advance)
