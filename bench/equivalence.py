"""Do the speed paths keep the results? Packed vs single runs, CUDA graph vs eager, NHWC.

Trains the same runs several ways on synthetic data (ResNet-9 at width 1/4, augmentation
on, b = 48 so that every epoch ends on a partial batch of 32) and reports, against every
run trained alone, eager and contiguous (the paper's one run per GPU), the largest
difference in the final weights and in the logged metrics. The ways: one pack eager; one
pack with channels_last; and on a GPU one pack replayed as a CUDA graph, with and without
channels_last.

In float64 every way must agree with the reference to RTOL_FLOAT64 (only summation order
differs), and a CUDA graph must reproduce the eager pack of the same layout bitwise in
both precisions (deterministic kernels: train's default); the script exits 1 otherwise.
In float32 with TF32 (what training uses) packed vs single differences are reported, not
judged: grouped and single convolutions sum in different orders, and early training
amplifies that noise.

    python bench/equivalence.py                 # the device's paths (CUDA graphs on a GPU)
    python bench/equivalence.py --quick         # CI-sized: 2 runs, 1 epoch, ~10 s on CPU
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import pandas as pd
import torch

from initmem.plan.spec import Pack, Recipe, Run
from initmem.records.files import read_records
from initmem.training import data
from initmem.training.command import resolve_device
from initmem.training.trainer import PackTrainer

RTOL_FLOAT64 = 1e-8
LOSSES = ("train_loss", "val_loss", "test_loss", "kernel_fro_norm")
ACCURACIES = ("train_acc", "val_acc", "test_acc")


def recipe(quick: bool) -> Recipe:
    """b = 48 leaves a partial last batch (32 of 512 images, 16 of 256)."""
    return Recipe(family="equivalence", arch="resnet9", optimizer="adamw", b=48,
                  epochs=1 if quick else 3, lr0=0.01, width=0.125 if quick else 0.25,
                  dataset="synthetic", train_subset=256 if quick else 512,
                  eval_subset=128 if quick else 256, l2=1e-4,
                  hyperparameters={"weight_decay": 1e-4}, augment=True)


def train(pack: Pack, splits: data.Splits, device: torch.device, out: Path,
          **speed: bool) -> tuple[list[torch.Tensor], pd.DataFrame]:
    """Final weights (one tensor per parameter, runs stacked) and every run's history."""
    model = PackTrainer(pack, splits, out, device, progress=False, **speed).run().model
    history = pd.concat([read_records(out / r.run_dir)[0] for r in pack.runs])
    return [p.detach().double().cpu() for p in model.parameters()], history


def trained_alone(pack: Pack, splits: data.Splits, device: torch.device,
                  out: Path) -> tuple[list[torch.Tensor], pd.DataFrame]:
    alone = [train(Pack(pack.recipe, (run,)), splits, device, out / run.run_id)
             for run in pack.runs]
    weights = [torch.cat(ws) for ws in zip(*(w for w, _ in alone), strict=True)]
    return weights, pd.concat([h for _, h in alone])


def differences(a: tuple, b: tuple) -> dict[str, float]:
    """Largest differences of b against a: weights relative to a's largest weight, losses
    and ||W||_F relative, accuracies absolute (a fraction of the images)."""
    (wa, ha), (wb, hb) = a, b
    scale = max(w.abs().max().item() for w in wa)
    weight = max((x - y).abs().max().item() for x, y in zip(wa, wb, strict=True)) / scale
    keys = ["run_id", "epoch"]
    ha, hb = ha.set_index(keys).sort_index(), hb.set_index(keys).sort_index()
    loss = max(((ha[m] - hb[m]).abs() / ha[m].abs()).max() for m in LOSSES)
    accuracy = max((ha[m] - hb[m]).abs().max() for m in ACCURACIES)
    return {"weights_rel": weight, "losses_rel": float(loss), "acc_abs": float(accuracy)}


def ways(cuda: bool) -> dict[str, dict[str, bool]]:
    found = {"packed": {}, "packed_cl": {"channels_last": True}}
    if cuda:
        found |= {"packed_graph": {"cuda_graph": True},
                  "packed_graph_cl": {"cuda_graph": True, "channels_last": True}}
    return found


def compare(dtype: torch.dtype, device: torch.device, quick: bool, out: Path) -> list[dict]:
    torch.set_default_dtype(dtype)
    n_runs = 2 if quick else 4
    try:
        r = recipe(quick)
        pack = Pack(r, tuple(Run(r, sigma_w, seed) for seed, sigma_w in
                             enumerate([0.5, 1.0, 2.0, 4.0][:n_runs])))
        splits = data.load_splits(r, root=None, device=device)
        reference = trained_alone(pack, splits, device, out / "alone")
        results = {name: train(pack, splits, device, out / name, **speed)
                   for name, speed in ways(device.type == "cuda").items()}
    finally:
        torch.set_default_dtype(torch.float32)
    rows = [{"dtype": str(dtype).removeprefix("torch."), "way": name, "against": "alone",
             **differences(reference, result)} for name, result in results.items()]
    for graph, eager in (("packed_graph", "packed"), ("packed_graph_cl", "packed_cl")):
        if graph in results:
            rows.append({"dtype": rows[0]["dtype"], "way": graph, "against": eager,
                         **differences(results[eager], results[graph])})
    return rows


def failures(rows: list[dict]) -> list[str]:
    bad = []
    for r in rows:
        label = f"{r['way']} vs {r['against']} ({r['dtype']})"
        largest = max(r["weights_rel"], r["losses_rel"], r["acc_abs"])
        if r["against"] != "alone" and largest:
            bad.append(f"{label}: a CUDA graph must reproduce its eager pack bitwise")
        elif r["dtype"] == "float64" and largest > RTOL_FLOAT64:
            bad.append(f"{label}: above {RTOL_FLOAT64:g} in float64")
    return bad


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    parser.add_argument("--quick", action="store_true",
                        help="2 runs, 1 epoch, width 1/8, 256 images (CI on CPU)")
    args = parser.parse_args(argv)
    device = resolve_device(args.device)
    with tempfile.TemporaryDirectory() as tmp:
        rows = [row for dtype in (torch.float64, torch.float32)
                for row in compare(dtype, device, args.quick, Path(tmp) / str(dtype))]
    r = recipe(args.quick)
    print(f"device {device}; {r.arch} width {r.width:g}, b={r.b}, {r.train_subset} images, "
          f"{r.epochs} epochs; largest |difference| "
          "(weights: relative to the largest weight; losses and ||W||_F: relative; "
          "accuracies: absolute)")
    print(pd.DataFrame(rows).to_string(index=False, float_format=lambda x: f"{x:.3g}"))
    bad = failures(rows)
    for line in bad:
        print("FAIL", line, file=sys.stderr)
    print("equivalence: " + ("FAILED" if bad else "ok"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
