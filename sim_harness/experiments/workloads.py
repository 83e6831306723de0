"""Training workloads of the ``training`` and ``utilization`` experiments: one iteration of
ResNet-50, a GNMT-like transformer and DLRM on one node, as compute tasks and collectives.

A :class:`Workload` is an ordered list of compute :class:`Task` (reference-NPU cycles) and the
:class:`Comm` collectives the node issues: each one after a given task, and needed before a
given later task (``before``; ``None``: only by the next iteration). The sizes, FLOPs and
compute times below are parameters, with their sources; where no source fixes a value, it is an
assumption and says so.

Reference platform (:data:`PLATFORM`)
    A V100-class NPU: 900 GB/s of HBM2, and 40 TFLOP/s of *effective* fp16 throughput (about a
    third of the 125 TFLOP/s tensor-core peak; measured ResNet-50 training on a V100 runs at
    roughly 1,300 images/s x 24.6 GFLOP per image = 32 TFLOP/s). ASTRA-sim cycles are 1 ns (its
    default clock), so ``reference cycles = FLOPs / 40,000``.

Scaling onto the RTL system
    Our node's memory gives 32 bytes per cycle at 1 GHz (32 GB/s), and a link carries 16 GB/s:
    the balance of a 900 GB/s NPU with 450 GB/s of network per ring direction, scaled down by
    900 / 32 = 28.1. Compute runs that much slower on our cycle scale
    (:func:`compute_scale`), so compute, memory and network keep the reference platform's
    ratios. The training experiment also reports the speedups with this scale halved and
    doubled (equivalently, a different batch size or NPU speed).

Compute's memory demand (:data:`COMPUTE_MEM_SHARE`), an assumption per workload
    The share of the node's memory bandwidth that the training compute keeps busy while it
    runs: the time-weighted mix of compute-bound kernels (GEMM, convolution: about 0.3 of the
    HBM bandwidth at their roofline) and memory-bound ones (normalization, activation,
    element-wise, embedding gathers/updates, optimizer: about 0.9). ResNet-50: about 30% of a
    V100 iteration is batch norm, ReLU and element-wise work -> 0.7 x 0.3 + 0.3 x 0.9 = 0.48,
    taken as 0.5. Transformer: softmax, layer norm, dropout and the large logits/embedding
    steps are about half -> 0.6. DLRM: embedding gathers and sparse updates plus the
    interaction are the larger part -> 0.65. In the RTL these are the memory model's
    background share while compute runs; compute always gets its share, the collective the
    rest.

Workloads
    * ``resnet50``: the ASTRA-sim workload file (``Resnet50_DataParallel.txt``, DATA parallel,
      54 layers): the weight-gradient all-reduce sizes as given (fp32, 102 MB per iteration)
      and the per-layer split of compute. Read with :func:`sim_harness.traces.astra.
      load_astra_workload`, converted by :func:`from_trace`. At 40 TFLOP/s the file's 1.1 M
      cycles of compute are ~44 GFLOP, about two images: a small-batch setting. The compute is
      scaled to :data:`RESNET50_BATCH` images per NPU (32, the per-GPU batch of Goyal et al.,
      "Accurate, Large Minibatch SGD", arXiv 1706.02677), at 22.8 GFLOP per image for training
      (3 x the forward pass's 3.8 G multiply-adds at 224 x 224, He et al., "Deep Residual
      Learning", arXiv 1512.03385, Table 1; 2 FLOPs per multiply-add).
    * ``gnmt``: **a transformer stands in for GNMT**; GNMT itself is an LSTM encoder-decoder
      (Wu et al., "Google's Neural Machine Translation System", arXiv 1609.08144: 8 encoder and
      8 decoder LSTM layers of 1024 units, attention, a shared wordpiece vocabulary of 8 K to
      32 K). Ours has GNMT's depth and width as transformer layers, data parallel: 8 encoder
      and 8 decoder layers (d_model 1024, FFN 4096), a 32 K shared vocabulary, 2,048 tokens
      per NPU per side (64 sentences of 32 tokens), sequences of 32. Its gradient is of the
      same order as GNMT's (about 160 M parameters with the embedding), but its compute per
      token and its layer-by-layer timing differ from an LSTM's; what the paper's GNMT run
      used is not known here. Weights: 4 d^2 per attention block, 2 d d_ff per FFN (biases
      and norms left out). FLOPs: 2 per multiply-add, attention scores 2 x seq x d per token per
      attention block, backward = 2 x forward. One all-reduce per layer's weight gradient,
      issued when the layer's backward ends; the shared embedding's at the very end.
    * ``dlrm``: the MLPerf DLRM (Criteo Terabyte) model: bottom MLP 13-512-256-128, top MLP
      479-1024-1024-512-256-1 (479 = 128 + 27 x 26 / 2 dot interactions), 26 embedding tables
      of dimension 128, one lookup per table; local batch 2,048 per NPU. Hybrid parallel as in
      the DLRM paper: tables model-parallel (26 / p per node), MLPs data-parallel. Forward:
      embedding gathers, then an all-to-all of the pooled embeddings (26 x 2,048 x 128 x 4 B
      = 27 MB per node in and out) that the interaction waits for, overlapped with the
      bottom MLP; backward: top MLP layers (each issuing its gradient all-reduce), the
      interaction, the all-to-all of the embedding gradients (the embedding update waits for
      it) overlapped with the bottom MLP's backward. Gathers/updates are memory-bound: their
      time is their bytes at the reference HBM rate (update = read + write). Sizes from the
      MLPerf training reference of DLRM (``dlrm_s_pytorch.py`` settings for Criteo
      Terabyte: ``--arch-sparse-feature-size=128 --arch-mlp-bot=13-512-256-128
      --arch-mlp-top=1024-1024-512-256-1``); the local batch is an assumption.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .common import ExperimentError

__all__ = ["PLATFORM", "COMPUTE_MEM_SHARE", "WORKLOAD_NAMES", "Task", "Comm", "Workload",
           "from_trace", "resnet50", "gnmt", "dlrm", "load_workload", "compute_scale",
           "RESNET50_FILE", "RESNET50_BATCH", "RESNET50_TRAIN_FLOPS_PER_IMAGE"]

PLATFORM = {"ref_mem_gbps": 900.0, "ref_flops_per_cycle": 40_000.0, "ref_clock_ghz": 1.0}
COMPUTE_MEM_SHARE = {"resnet50": 0.5, "gnmt": 0.6, "dlrm": 0.65}
WORKLOAD_NAMES = ("resnet50", "gnmt", "dlrm")
#: Images per NPU per iteration of the ResNet-50 workload, and training FLOPs per image.
RESNET50_BATCH = 32
RESNET50_TRAIN_FLOPS_PER_IMAGE = 3 * 2 * 3.8e9

#: The ASTRA-sim ResNet-50 workload, in the shared data folder beside the checkout.
RESNET50_FILE = (Path(__file__).resolve().parents[2].parent / "shared" / "data" / "astra-sim"
                 / "workload" / "Resnet50_DataParallel.txt")


@dataclass(frozen=True)
class Task:
    """Compute of one pass or layer: ``cycles`` on the reference NPU."""
    name: str
    cycles: float


@dataclass(frozen=True)
class Comm:
    """A collective of ``nbytes`` (S per node) issued when task ``after`` ends (-1: at the
    start) and needed before task ``before`` starts (None: not within this iteration)."""
    name: str
    collective: str
    nbytes: int
    after: int
    before: int | None = None


@dataclass
class Workload:
    name: str
    tasks: list[Task]
    comms: list[Comm]
    mem_share: float
    params: dict = field(default_factory=dict)

    @property
    def compute_cycles(self) -> float:
        return sum(t.cycles for t in self.tasks)

    def comm_bytes(self, collective: str | None = None) -> int:
        return sum(c.nbytes for c in self.comms if collective in (None, c.collective))

    def check(self) -> "Workload":
        n = len(self.tasks)
        for c in self.comms:
            if not -1 <= c.after < n or (c.before is not None and not c.after < c.before < n):
                raise ValueError(f"{self.name}: {c.name}: after={c.after}, before={c.before} "
                                 f"do not fit {n} tasks")
        return self


def compute_scale(mem_bytes_per_cycle: float, clock_mhz: float) -> float:
    """Reference-NPU cycles -> RTL-system cycles: reference HBM bandwidth over the node's
    memory bandwidth (both in GB/s), times the clock ratio."""
    ours_gbps = mem_bytes_per_cycle * clock_mhz / 1000.0
    return PLATFORM["ref_mem_gbps"] / ours_gbps * (clock_mhz / 1000.0) / PLATFORM[
        "ref_clock_ghz"]


def from_trace(trace, name: str, mem_share: float) -> Workload:
    """A workload from an imported ASTRA-sim trace (:func:`load_astra_workload`): before each
    collective, the compute since the previous one; weight-gradient collectives are needed
    only by the next iteration, forward and input-gradient ones by the next compute."""
    tasks, comms = [], []
    for k, spec in enumerate(trace.collectives):
        tasks.append(Task(f"before {spec.name}", float(spec.compute_cycles)))
        blocking = spec.extra.get("pass") in ("fwd", "ig")
        comms.append(Comm(spec.name, spec.collective, spec.bytes, after=k,
                          before=k + 1 if blocking else None))
    tasks.append(Task("trailing", float(trace.meta.get("trailing_compute_cycles", 0))))
    return Workload(name, tasks, comms, mem_share,
                    params={"source": trace.path, "parallelism": trace.meta.get("parallelism"),
                            "layers": trace.meta.get("layers")}).check()


def resnet50(path: str | Path = RESNET50_FILE, batch: int = RESNET50_BATCH) -> Workload:
    from ..trace import TraceError
    from ..traces.astra import load_astra_workload

    if not Path(path).is_file():
        raise ExperimentError(f"resnet50 workload: {path} not found (the ASTRA-sim "
                              "Resnet50_DataParallel.txt from ../shared/data)")
    try:
        trace = load_astra_workload(path)
    except TraceError as error:
        raise ExperimentError(str(error)) from None
    wl = from_trace(trace, "resnet50", COMPUTE_MEM_SHARE["resnet50"])
    file_images = wl.compute_cycles * PLATFORM["ref_flops_per_cycle"] \
        / RESNET50_TRAIN_FLOPS_PER_IMAGE
    factor = batch / file_images
    wl.tasks = [Task(t.name, t.cycles * factor) for t in wl.tasks]
    wl.params.update(batch=batch, file_images=round(file_images, 2),
                     compute_factor=round(factor, 3))
    return wl


GNMT = {"encoder_layers": 8, "decoder_layers": 8, "d_model": 1024, "d_ff": 4096,
        "vocab": 32_000, "tokens_per_side": 2048, "seq_len": 32, "bytes_per_param": 4}


def gnmt(p: dict = GNMT) -> Workload:
    d, ff, t, seq = p["d_model"], p["d_ff"], p["tokens_per_side"], p["seq_len"]
    flops_per_cycle = PLATFORM["ref_flops_per_cycle"]
    attn, ffn = 4 * d * d, 2 * d * ff
    scores = 2 * seq * d                         # QK^T and AV multiply-adds per token
    layers = ([("enc", attn + ffn, attn + ffn + scores)] * p["encoder_layers"]
              + [("dec", 2 * attn + ffn, 2 * attn + ffn + 2 * scores)] * p["decoder_layers"])
    fwd_flops = sum(2 * macs * t for _, _, macs in layers) + 2 * d * p["vocab"] * t
    tasks = [Task("forward", fwd_flops / flops_per_cycle),
             Task("logits backward", 2 * 2 * d * p["vocab"] * t / flops_per_cycle)]
    comms = []
    names = ([f"enc{i}" for i in range(p["encoder_layers"])]
             + [f"dec{i}" for i in range(p["decoder_layers"])])
    for name, (_, weights, macs) in reversed(list(zip(names, layers))):
        tasks.append(Task(f"{name} backward", 2 * 2 * macs * t / flops_per_cycle))
        comms.append(Comm(f"{name}.wg", "allreduce", weights * p["bytes_per_param"],
                          after=len(tasks) - 1))
    comms.append(Comm("embedding.wg", "allreduce", d * p["vocab"] * p["bytes_per_param"],
                      after=len(tasks) - 1))
    return Workload("gnmt", tasks, comms, COMPUTE_MEM_SHARE["gnmt"], params=dict(p)).check()


DLRM = {"bottom_mlp": [13, 512, 256, 128], "top_mlp": [479, 1024, 1024, 512, 256, 1],
        "tables": 26, "dim": 128, "lookups_per_table": 1, "local_batch": 2048,
        "bytes_per_param": 4}


def dlrm(p: dict = DLRM) -> Workload:
    flops_per_cycle = PLATFORM["ref_flops_per_cycle"]
    mem_per_cycle = PLATFORM["ref_mem_gbps"] / PLATFORM["ref_clock_ghz"]
    b, dim, tables = p["local_batch"], p["dim"], p["tables"]
    bpp = p["bytes_per_param"]

    def mlp(sizes):
        return [(f"{i}x{o}", (i * o + o)) for i, o in zip(sizes, sizes[1:])]

    bottom, top = mlp(p["bottom_mlp"]), mlp(p["top_mlp"])
    # Per node: 26/p tables looked up for the whole global batch (p x b samples) = 26 x b rows.
    rows = tables * p["lookups_per_table"] * b
    gather = rows * dim * bpp / mem_per_cycle
    a2a = tables * b * dim * bpp                # pooled embeddings, per node in and out
    features = p["top_mlp"][0]
    inter = 2 * (tables + 1) * (tables + 1) * dim * b / flops_per_cycle

    def fwd(weights):
        return 2 * weights * b / flops_per_cycle

    tasks = [Task("embedding gather", gather),
             Task("bottom MLP forward", sum(fwd(w) for _, w in bottom)),
             Task("interaction forward", inter),
             Task("top MLP forward", sum(fwd(w) for _, w in top))]
    comms = [Comm("alltoall.fwd", "alltoall", a2a, after=0, before=2)]
    for name, w in reversed(top):
        tasks.append(Task(f"top {name} backward", 2 * fwd(w)))
        comms.append(Comm(f"top.{name}.wg", "allreduce", w * bpp, after=len(tasks) - 1))
    tasks.append(Task("interaction backward", 2 * inter))
    comms.append(Comm("alltoall.bwd", "alltoall", a2a, after=len(tasks) - 1))
    a2a_bwd = len(comms) - 1
    for name, w in reversed(bottom):
        tasks.append(Task(f"bottom {name} backward", 2 * fwd(w)))
        comms.append(Comm(f"bottom.{name}.wg", "allreduce", w * bpp, after=len(tasks) - 1))
    tasks.append(Task("embedding update", 2 * gather))
    comms[a2a_bwd] = Comm("alltoall.bwd", "alltoall", a2a, after=comms[a2a_bwd].after,
                          before=len(tasks) - 1)
    params = dict(p, interaction_features=features)
    return Workload("dlrm", tasks, comms, COMPUTE_MEM_SHARE["dlrm"], params=params).check()


def load_workload(name: str, resnet50_file: str | Path | None = None) -> Workload:
    if name == "resnet50":
        return resnet50(resnet50_file or RESNET50_FILE)
    if name == "gnmt":
        return gnmt()
    if name == "dlrm":
        return dlrm()
    raise ExperimentError(f"workload: {name!r}; allowed: {', '.join(WORKLOAD_NAMES)}")
