"""Data stage: CIFAR-10 (or a synthetic stand-in) as tensors on the training device,
batched per-image augmentation, and the per-run random streams.

Images are stored as uint8 (N, 3, 32, 32) on the device, a quarter of the memory of
float32; `as_float` turns a batch into float32 pixels in [0, 1] (no mean/std
normalisation, as in the paper). Labels are int64.

The fixed split: `numpy.random.RandomState(42).permutation(50_000)` of the training
images (in file order, data_batch_1..5); its first 10,000 entries are the validation
set, the remaining 40,000 (in permuted order) the training set. The paper's own Keras/TF
permutation cannot be recovered, so this is our definition; RandomState is numpy's
stream with a stability guarantee across versions. Subsets (`Recipe.train_subset`,
`Recipe.eval_subset`) are the first n of these orders; the test set is shuffled by
RandomState(42).permutation(10_000) so that its subsets are fair samples.
"""

from __future__ import annotations

import functools
import hashlib
import io
import json
import math
import pickle
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from initmem.errors import InputError
from initmem.plan.inputs import parse_json
from initmem.plan.spec import EVAL_SIZE, SYNTHETIC_EVAL_SIZE, SYNTHETIC_TRAIN_SIZE, Recipe
from initmem.vocabulary import GENERATED_DATA, MANIFEST_VERIFIED, MD5_VERIFIED, UNVERIFIED

FOLDER = "cifar-10-batches-py"
# Official MD5 sums, as torchvision's CIFAR10 lists them (copied to avoid importing
# torchvision on every load; test_data checks they stay equal).
MD5 = {
    "data_batch_1": "c99cafc152244af753f735de768cd75f",
    "data_batch_2": "d4bba439e000b95fd0a9bffe97cbabec",
    "data_batch_3": "54ebc095f3ab1f0389bbae665268c751",
    "data_batch_4": "634d18415352ddfa80567beed471001a",
    "data_batch_5": "482c414d41f54cd18b22e5b47cb7c3cb",
    "test_batch": "40351d587109b95175f43aff81a1287e",
    "batches.meta": "5ff9c542aee3614f3951f8cda6e48888",
}
TRAIN_FILES = tuple(f"data_batch_{k}" for k in range(1, 6))
# What each official batch file says it is: a swapped or renamed file shows here.
BATCH_LABELS = {**{name: f"training batch {k} of 5" for k, name in enumerate(TRAIN_FILES, 1)},
                "test_batch": "testing batch 1 of 1"}
IMAGES_PER_FILE = 10_000
# Each class's share of a batch file's labels: the official training files hold about
# 9.4-10.4% (the test file 10%), the offline copy's 9.6-10.6%; outside these, it is foreign.
CLASS_SHARE = (0.085, 0.115)
# The offline copy's own checksums, written by `initmem cifar10-copy` after building it.
MANIFEST = "initmem-manifest.json"
MANIFEST_FORMAT = "initmem-cifar10-copy"
MANIFEST_BYTES = 64 * 1024  # the builder writes under 1 KB: a SHA-256 per file
BUILD_COMMAND = "initmem cifar10-copy"
# What numpy's pickles of arrays name (numpy 1 and 2 module paths both start with numpy).
NUMPY_PICKLE_NAMES = frozenset({"_reconstruct", "ndarray", "dtype", "scalar", "_frombuffer"})
SPLIT_SEED = 42
PAD = 4  # reflect padding of the random crop
STREAMS = ("init", "order", "augment")  # append only: a stream's seed depends on its index
SYNTHETIC_SEED = 0
SYNTHETIC_BLOCK = 500  # images generated per block: the first n never depend on the total
SYNTHETIC_NUISANCE = 1.5  # class-free vs class pattern: nearest class mean ~90%, not 100%


class DataError(InputError):
    """The data cannot be loaded; the message says which file or setting and what to do."""


@dataclass(frozen=True)
class Splits:
    """Train/validation/test images (uint8, N x 3 x 32 x 32) and int64 labels, on one device."""

    train_x: Tensor
    train_y: Tensor
    val_x: Tensor
    val_y: Tensor
    test_x: Tensor
    test_y: Tensor
    verification: str  # how the files were verified: md5, manifest, unverified, synthetic
    # the larger test set of Recipe.best_test_subset (whose first images are test_x)
    best_test_x: Tensor | None = None
    best_test_y: Tensor | None = None


def as_float(x: Tensor) -> Tensor:
    """A uint8 image batch as pixels in [0, 1], in torch's default dtype (float32; the
    pack-equivalence test raises it to float64)."""
    return x.to(torch.get_default_dtype()).div_(255)


def load_splits(recipe: Recipe, root: str | Path | None, *, download: bool = False,
                allow_unverified: bool = False, device: str | torch.device = "cpu") -> Splits:
    """The recipe's data set (cut to its subsets) as tensors on `device`.

    dataset "cifar10" reads `<root>/cifar-10-batches-py` (downloading it first when
    `download`); "synthetic" generates `synthetic_splits` and ignores `root` (may be None).
    """
    n_eval, n_test = recipe.n_eval, recipe.n_test_best
    if recipe.dataset == "synthetic":
        arrays = synthetic_splits(recipe.n_train, n_eval, n_test)
        verification = GENERATED_DATA
    elif root is None:
        raise DataError("dataset cifar10 needs a root folder (config data.root, --data-root)")
    else:
        arrays, verification = _cifar10_splits(Path(root), download, allow_unverified,
                                               (recipe.n_train, n_eval, n_test))
    cut = []
    for (x, y), n, name in zip(arrays, (recipe.n_train, n_eval, n_test),
                               ("train", "validation", "test"), strict=True):
        if n > len(y):
            raise DataError(f"the recipe asks for {n} {name} images but the {recipe.dataset} "
                            f"data ({verification}) has {len(y)}; set train_subset/"
                            f"eval_subset/best_test_subset to at most {len(y)}")
        cut += [x[:n].to(device), y[:n].to(device)]
    train_x, train_y, val_x, val_y, test_x, test_y = cut
    best = (test_x, test_y) if recipe.best_test_subset else (None, None)
    return Splits(train_x, train_y, val_x, val_y, test_x[:n_eval], test_y[:n_eval],
                  verification, *best)


# ----------------------------------------------------------------------------- CIFAR-10

def split_indices(n_total: int = 5 * EVAL_SIZE) -> tuple[np.ndarray, np.ndarray]:
    """(train, validation) indices into the training files: RandomState(42) permutation,
    the first fifth (10,000 of 50,000) held out for validation."""
    perm = np.random.RandomState(SPLIT_SEED).permutation(n_total)
    return perm[n_total // 5:], perm[:n_total // 5]


def test_indices(n_test: int = EVAL_SIZE) -> np.ndarray:
    """A fixed shuffle of the test set, so that an eval_subset is a fair sample even from
    a copy whose test file is sorted by class (the JPEG-derived one is)."""
    return np.random.RandomState(SPLIT_SEED).permutation(n_test)


def _cifar10_splits(root: Path, download: bool, allow_unverified: bool,
                    sizes: tuple[int, int, int]):
    """(train, validation, test) arrays, each cut to the first n of its order (`sizes`;
    more than a split holds keeps it whole, for load_splits to refuse), and how the files
    were verified: copying only those images makes a small pack's data a fraction of a
    second."""
    train_x, train_y, test_x, test_y, verification = _cifar10_files(root, download,
                                                                    allow_unverified)
    train, val = split_indices(len(train_y))
    test = test_indices(len(test_y))
    cut = [(train_x, train_y, train), (train_x, train_y, val), (test_x, test_y, test)]
    arrays = [_tensors(x[order[:n]], y[order[:n]])
              for (x, y, order), n in zip(cut, sizes, strict=True)]
    return arrays, verification


@functools.cache  # a job of several packs reads and checks the files once
def _cifar10_files(root: Path, download: bool, allow_unverified: bool):
    """The checked training and test files' images and labels, and how they were
    verified (vocabulary: md5, manifest or unverified)."""
    folder = root / FOLDER
    if root.exists() and not root.is_dir():
        raise DataError(f"the CIFAR-10 root {root} is a file; it must be the folder that "
                        f"holds {FOLDER} (config data.root, --data-root)")
    present = all((folder / name).is_file() for name in MD5)
    if download and (not present or _differing(_read_files(folder), MD5, hashlib.md5)):
        _download(root)
    if not folder.is_dir():
        raise DataError(f"CIFAR-10 not found: {folder} does not exist. {_how_to_get(root)}")
    missing = [name for name in MD5 if not (folder / name).is_file()]
    if missing:
        raise DataError(f"CIFAR-10 copy in {folder} is incomplete: missing "
                        f"{', '.join(missing)}. {_how_to_get(root)}")
    raw = _read_files(folder)
    batches = read_batches(folder, raw)
    verification = _verification(folder, raw, allow_unverified)
    train_x, train_y = map(np.concatenate, zip(*(batches[f] for f in TRAIN_FILES), strict=True))
    test_x, test_y = batches["test_batch"]
    return train_x, train_y, test_x, test_y, verification


def read_batches(folder: Path, raw: dict[str, bytes]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Every batch file's images and labels, each checked for what its name says it is
    (_layout_problem), whatever its checksums; DataError names every file that is not."""
    batches, problems = {}, []
    for name in BATCH_LABELS:
        try:
            batches[name] = _read_batch(name, raw[name])
        except DataError as err:
            problems.append(f"{name} {err}")
    if problems:
        raise DataError(f"CIFAR-10 copy in {folder} has files that are not what their names "
                        f"say: {'; '.join(problems)}. Rebuild or re-download the copy")
    return batches


def _verification(folder: Path, raw: dict[str, bytes], allow_unverified: bool) -> str:
    """md5 (the official release), manifest (as its builder wrote it) or, only when
    allowed, unverified; otherwise DataError naming which files differ from what."""
    if not _differing(raw, MD5, hashlib.md5):
        return MD5_VERIFIED
    manifest = _manifest_sums(folder)
    if isinstance(manifest, dict) and not _differing(raw, manifest, hashlib.sha256):
        return MANIFEST_VERIFIED
    differs = _differences(folder, raw, manifest)
    if not allow_unverified:
        raise DataError(f"CIFAR-10 copy in {folder} is unverified: {differs}. Rebuild the "
                        f"offline copy (`{BUILD_COMMAND} {folder.parent}`, which writes "
                        f"{MANIFEST}), or to accept it as it is set data.allow_unverified: "
                        "true in the config or pass --allow-unverified (allow_unverified=True)")
    warnings.warn(f"using an unverified CIFAR-10 copy ({folder}): {differs}", stacklevel=4)
    return UNVERIFIED


def _differences(folder: Path, raw: dict[str, bytes], manifest: dict | str) -> str:
    """Which files differ from the official MD5 sums and from the copy's manifest."""
    against = f"{', '.join(_differing(raw, MD5, hashlib.md5))} differ from the official MD5 sums"
    if isinstance(manifest, str):
        return f"{against}, and {manifest}"
    changed = _differing(raw, manifest, hashlib.sha256)
    return f"{against}, and {', '.join(changed)} from the SHA-256 sums of its {MANIFEST}"


def _differing(raw: dict[str, bytes], sums: dict[str, str], digest: Any) -> list[str]:
    """The files whose bytes do not hash (by `digest`) to their entry of `sums`."""
    return [name for name, data in raw.items() if digest(data).hexdigest() != sums.get(name)]


def _read_files(folder: Path) -> dict[str, bytes]:
    """The bytes of each file of the layout (read once: hashed, then unpickled)."""
    return {name: (folder / name).read_bytes() for name in MD5}


def _manifest_sums(folder: Path) -> dict[str, str] | str:
    """file name -> SHA-256 from the copy's manifest, or why there are none."""
    path = folder / MANIFEST
    if not path.is_file():
        return f"the copy has no {MANIFEST} (the offline builder writes one)"
    try:
        manifest = parse_json(path.read_bytes(), path, MANIFEST_BYTES)
        sums = manifest["sha256"] if manifest.get("format") == MANIFEST_FORMAT else None
    except (ValueError, TypeError, KeyError, AttributeError, OSError):
        sums = None
    return sums if isinstance(sums, dict) else f"its {MANIFEST} does not read as one"


def write_manifest(folder: Path, built_by: str) -> Path:
    """Record the SHA-256 of every file of a copy just built, after checking each batch
    file's layout: the loader then verifies the copy against it."""
    raw = _read_files(folder)
    read_batches(folder, raw)
    manifest = {"format": MANIFEST_FORMAT, "built_by": built_by,
                "sha256": {name: hashlib.sha256(data).hexdigest() for name, data in raw.items()}}
    (folder / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    return folder / MANIFEST


def _how_to_get(root: Path) -> str:
    return ("Either download it (download=True, config data.download: true; needs network "
            f"access), build a local copy from ../shared with `{BUILD_COMMAND} {root}`, "
            "point the `root` setting (config data.root, --data-root) at an existing copy, "
            "or choose the synthetic data set (recipe dataset: synthetic).")



def _download(root: Path) -> None:
    from torchvision.datasets import CIFAR10  # only here: torchvision is slow to import

    try:
        CIFAR10(str(root), train=True, download=True)
    except Exception as err:  # any network or archive failure means the same to the user
        raise DataError(
            f"downloading CIFAR-10 from {CIFAR10.url} into {root} failed: {err}. Without "
            "network access, point the `root` setting (data.root, --data-root) at a local "
            f"copy (build one with `{BUILD_COMMAND} {root}`), or choose the synthetic data "
            "set (recipe dataset: synthetic).") from err


class _ArrayUnpickler(pickle.Unpickler):
    """Plain data and numpy arrays only: a file that is checked because it may be foreign
    must not run the code a pickle can name."""

    def find_class(self, module: str, name: str) -> Any:
        if module.split(".")[0] == "numpy" and name in NUMPY_PICKLE_NAMES:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"it names {module}.{name}, which no CIFAR-10 batch does")


def _read_batch(name: str, raw: bytes) -> tuple[np.ndarray, np.ndarray]:
    """Images (n, 3072) uint8 and labels (n,) of one pickled batch; DataError (its text
    follows the file's name) when it is not the batch its name says."""
    try:
        entry = _ArrayUnpickler(io.BytesIO(raw), encoding="latin1").load()
        x = np.asarray(entry["data"])
        y = np.asarray(entry["labels"], dtype=np.int64)
        label = entry.get("batch_label")
    except Exception as err:  # truncated or foreign file: pickle raises many kinds
        raise DataError(f"is corrupt or truncated ({type(err).__name__}: {err})") from None
    if x.dtype != np.uint8 or x.ndim != 2 or x.shape[1] != 3072 or y.shape != (len(x),) \
            or (y.size and (y.min() < 0 or y.max() > 9)):
        raise DataError(f"has unexpected contents: data {x.dtype} {x.shape}, {y.size} labels; "
                        "expected uint8 (n, 3072) and n labels in 0..9")
    problem = _layout_problem(name, label, y)
    if problem:
        raise DataError(problem)
    return x, y


def _layout_problem(name: str, label: object, y: np.ndarray) -> str | None:
    """What makes a batch file's label or labels unlike the official file of that name:
    its batch_label (a swapped or renamed file), its image count (a truncated one) or its
    classes' shares (a foreign one); None when it looks right."""
    if label != BATCH_LABELS[name]:
        return f"is labelled {label!r}, not {BATCH_LABELS[name]!r} (a swapped or renamed file)"
    if len(y) != IMAGES_PER_FILE:
        return f"holds {len(y)} images, not {IMAGES_PER_FILE} (a truncated or foreign file)"
    shares = np.bincount(y, minlength=10) / len(y)
    low, high = CLASS_SHARE
    if shares.min() < low or shares.max() > high:
        return (f"holds {shares.min():.1%} to {shares.max():.1%} of a class; each class must "
                f"be {low:.1%} to {high:.1%} of a file, as in the official ones (a foreign file)")
    return None


def _tensors(x: np.ndarray, y: np.ndarray) -> tuple[Tensor, Tensor]:
    return torch.from_numpy(x.reshape(-1, 3, 32, 32).copy()), torch.from_numpy(y)


# ---------------------------------------------------------------------------- synthetic

def synthetic_splits(n_train: int = SYNTHETIC_TRAIN_SIZE, n_val: int = SYNTHETIC_EVAL_SIZE,
                     n_test: int = SYNTHETIC_EVAL_SIZE,
                     seed: int = SYNTHETIC_SEED) -> list[tuple[Tensor, Tensor]]:
    """A learnable CIFAR-shaped stand-in: [(x, y)] for train, validation, test.

    Each class owns a smooth colour pattern (a random 3 x 4 x 4 grid upsampled to 32 x 32);
    an image is its class pattern plus a random smooth pattern of the same kind (so
    classes overlap and a linear read-out is good but not perfect), shifted by up to 4
    pixels, plus pixel noise, quantised to uint8. Deterministic from `seed`; generated in
    blocks, so the first n images of a split do not depend on the size asked for.
    """
    gen = torch.Generator().manual_seed(seed)
    templates = torch.randn(10, 3, 4, 4, generator=gen)
    return [_synthetic_split(templates, n, seed, part) for part, n in
            enumerate((n_train, n_val, n_test))]


def _synthetic_split(templates: Tensor, n: int, seed: int, part: int) -> tuple[Tensor, Tensor]:
    xs, ys = [], []
    for block in range(math.ceil(n / SYNTHETIC_BLOCK)):
        gen = torch.Generator().manual_seed(_stream_seed(seed, 1 + part, block))
        y = torch.randint(0, 10, (SYNTHETIC_BLOCK,), generator=gen)
        nuisance = torch.randn(SYNTHETIC_BLOCK, 3, 4, 4, generator=gen)
        coarse = (templates[y] + SYNTHETIC_NUISANCE * nuisance) / math.hypot(1, SYNTHETIC_NUISANCE)
        smooth = F.interpolate(coarse, size=(32, 32), mode="bilinear", align_corners=False)
        shifts = torch.randint(0, 2 * PAD + 1, (SYNTHETIC_BLOCK, 2), generator=gen)
        no_flip = torch.zeros(SYNTHETIC_BLOCK, dtype=torch.bool)
        smooth = crop_flip(smooth, shifts, no_flip)
        noise = torch.randn(SYNTHETIC_BLOCK, 3, 32, 32, generator=gen)
        x = (0.5 + 0.15 * smooth + 0.1 * noise).clamp(0, 1)
        xs.append((x * 255).round().to(torch.uint8))
        ys.append(y)
    return torch.cat(xs)[:n], torch.cat(ys)[:n]


# ------------------------------------------------------------------------- augmentation

def crop_flip(x: Tensor, offsets: Tensor, flips: Tensor, pad: int = PAD) -> Tensor:
    """Per image: flip horizontally where `flips`, reflect-pad by `pad`, crop back to
    H x W at (row, col) `offsets` in [0, 2 pad]. One gather, no padded copy, any dtype.

    x (M, C, H, W); offsets (M, 2) int; flips (M,) bool. Offsets (pad, pad) unflipped is
    the identity. Reflect padding mirrors without repeating the edge (as torch's "reflect").
    """
    m, c, h, w = x.shape
    rows = _reflect(torch.arange(h, device=x.device) + offsets[:, :1] - pad, h)
    cols = _reflect(torch.arange(w, device=x.device) + offsets[:, 1:] - pad, w)
    cols = torch.where(flips[:, None], w - 1 - cols, cols)
    index = (rows[:, :, None] * w + cols[:, None, :]).reshape(m, 1, h * w).expand(m, c, h * w)
    return x.reshape(m, c, h * w).gather(2, index).reshape(m, c, h, w)


def _reflect(i: Tensor, n: int) -> Tensor:
    """Index into a length-n axis after reflect padding (valid for |overhang| < n)."""
    i = i.abs()
    return torch.where(i > n - 1, 2 * (n - 1) - i, i)


def epoch_augmentations(n_images: int, generators: Sequence[torch.Generator]) -> Tensor:
    """One epoch's augmentation draws per run, (N, n_images, 3) int64: for every slot of
    the epoch's order a flip (0/1) and a (row, col) crop offset in [0, 2 PAD]. Row i comes
    from generators[i] alone (n flips, then n offset pairs), so a run's augmentation is
    the same alone or in any pack. Drawn once per epoch, as the order is: per step that
    would be 2N small kernel launches outside the step's CUDA graph."""
    draws = []
    for gen in generators:
        flips = torch.randint(0, 2, (n_images, 1), generator=gen, device=gen.device)
        offsets = torch.randint(0, 2 * PAD + 1, (n_images, 2), generator=gen, device=gen.device)
        draws.append(torch.cat([flips, offsets], dim=1))
    return torch.stack(draws)


def augment(x: Tensor, draws: Tensor) -> Tensor:
    """Random flip, 4-pixel reflect pad and random crop of a pack's batch x (N, B, C, H, W)
    by its slice (N, B, 3) of the epoch's augmentation draws."""
    draws = draws.flatten(0, 1)
    out = crop_flip(x.flatten(0, 1), draws[:, 1:], draws[:, 0].bool())
    return out.reshape(x.shape)


# ------------------------------------------------------------------ order and streams

def epoch_permutations(n_train: int, generators: Sequence[torch.Generator]) -> Tensor:
    """One epoch's example order per run, (N, n_train), row i from generators[i]; call
    once per epoch (Keras reshuffles every epoch)."""
    return torch.stack([torch.randperm(n_train, generator=g, device=g.device)
                        for g in generators])


def minibatches(b: int, *plans: Tensor) -> Iterator[tuple[Tensor, ...]]:
    """Consecutive slices of b slots of each of the epoch's plans, all (N, n, ...): its
    order and, with augmentation, its draws. The last partial batch is kept, so an epoch
    has ceil(n / b) steps as in Keras."""
    for start in range(0, plans[0].shape[1], b):
        yield tuple(plan[:, start:start + b] for plan in plans)


def run_generators(seed: int, device: str | torch.device = "cpu") -> dict[str, torch.Generator]:
    """Independent generators "init", "order" and "augment" of one run, on `device`.

    Stream k (its index in STREAMS) is seeded with the first 64-bit word of numpy's
    SeedSequence(seed, spawn_key=(k,)), i.e. SeedSequence(seed).spawn(...)[k]: a hash
    of the run's seed and the stream alone, never of the pack it trains in.
    """
    return {name: torch.Generator(device=device).manual_seed(_stream_seed(seed, k))
            for k, name in enumerate(STREAMS)}


def _stream_seed(seed: int, *key: int) -> int:
    state = np.random.SeedSequence(seed, spawn_key=key).generate_state(1, np.uint64)
    return int(state[0])

