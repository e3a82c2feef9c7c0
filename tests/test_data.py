"""Data stage: loading (on a tiny fake CIFAR-10 folder), split, synthetic set,
augmentation, minibatch order and per-run streams."""

from __future__ import annotations

import hashlib
import json
import math
import pickle
import urllib.error

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from fakes import DAMAGED_COPIES, PER_BATCH, fake_cifar

from initmem import cli
from initmem.plan.spec import Recipe
from initmem.training import data
from initmem.training.data import (
    DataError,
    as_float,
    augment,
    crop_flip,
    epoch_augmentations,
    epoch_permutations,
    load_splits,
    minibatches,
    run_generators,
    split_indices,
    synthetic_splits,
)

pytestmark = pytest.mark.filterwarnings("ignore:using an unverified CIFAR-10 copy")


@pytest.fixture(autouse=True)
def small_batch_files(monkeypatch):
    """The fake copies below are the official layout scaled down to PER_BATCH images a
    file: every other layout rule (labels, class shares) holds as in the real files."""
    monkeypatch.setattr(data, "IMAGES_PER_FILE", PER_BATCH)


def recipe(**kw) -> Recipe:
    return Recipe(**{"family": "t", "arch": "resnet9", "optimizer": "sgd", "b": 8,
                     "epochs": 1, **kw})


SMALL = {"train_subset": 80, "eval_subset": 20}


def test_md5_table_is_torchvisions():
    from torchvision.datasets import CIFAR10

    official = dict(CIFAR10.train_list + CIFAR10.test_list)
    official[CIFAR10.meta["filename"]] = CIFAR10.meta["md5"]
    assert official == data.MD5


def test_unverified_copy_is_refused_naming_files_and_setting(tmp_path):
    fake_cifar(tmp_path)
    with pytest.raises(DataError, match="data_batch_1") as err:
        load_splits(recipe(**SMALL), tmp_path)
    message = str(err.value)
    assert "allow_unverified" in message and "--allow-unverified" in message
    assert f"has no {data.MANIFEST}" in message and "\n" not in message


def test_unverified_copy_loads_when_allowed(tmp_path):
    images = fake_cifar(tmp_path)
    with pytest.warns(UserWarning, match="unverified"):
        s = load_splits(recipe(**SMALL), tmp_path, allow_unverified=True)
    assert s.verification == "unverified"
    train_rows = np.concatenate([images[n] for n in data.TRAIN_FILES])
    train, val = split_indices(5 * PER_BATCH)
    test = images["test_batch"][data.test_indices(PER_BATCH)]
    expected = {"train": train_rows[train], "val": train_rows[val], "test": test}
    for part, rows in expected.items():
        x, y = getattr(s, f"{part}_x"), getattr(s, f"{part}_y")
        assert x.dtype == torch.uint8 and y.dtype == torch.int64
        assert x.shape == (len(rows), 3, 32, 32) and y.shape == (len(rows),)
        # NCHW: channel 0 is the first 1024 values of a row (torchvision's layout)
        assert torch.equal(x.reshape(len(rows), -1), torch.from_numpy(rows))


def test_verified_copy_loads_without_permission(tmp_path, monkeypatch):
    fake_cifar(tmp_path)
    folder = tmp_path / data.FOLDER
    sums = {n: hashlib.md5((folder / n).read_bytes()).hexdigest() for n in data.MD5}
    monkeypatch.setattr(data, "MD5", sums)
    s = load_splits(recipe(**SMALL), tmp_path)
    assert s.verification == "md5"


def build_with_manifest(tmp_path, capsys) -> None:
    """A fake copy through `initmem cifar10-copy`, with a builder that leaves it as it is."""
    fake_cifar(tmp_path)
    builder = tmp_path / "builder.py"
    builder.write_text("")
    assert cli.main(["cifar10-copy", str(tmp_path), "--builder", str(builder)]) == 0
    assert data.MANIFEST in capsys.readouterr().out


def test_a_copy_with_its_manifest_loads_without_permission(tmp_path, capsys):
    build_with_manifest(tmp_path, capsys)
    s = load_splits(recipe(**SMALL), tmp_path)
    assert s.verification == "manifest"


def test_a_file_changed_after_the_manifest_is_named_against_it(tmp_path, capsys):
    build_with_manifest(tmp_path, capsys)
    path = tmp_path / data.FOLDER / "data_batch_4"
    path.write_bytes(path.read_bytes() + b"\0")  # a trailing byte pickle never reads
    with pytest.raises(DataError) as err:
        load_splits(recipe(**SMALL), tmp_path)
    assert f"and data_batch_4 from the SHA-256 sums of its {data.MANIFEST}" in str(err.value)
    with pytest.warns(UserWarning, match="data_batch_4 from the SHA-256 sums"):
        assert load_splits(recipe(**SMALL), tmp_path,
                           allow_unverified=True).verification == "unverified"


def test_subsets_are_the_first_images(tmp_path):
    fake_cifar(tmp_path)
    full = load_splits(recipe(**SMALL), tmp_path, allow_unverified=True)
    cut = load_splits(recipe(train_subset=7, eval_subset=3, b=4), tmp_path, allow_unverified=True)
    assert torch.equal(cut.train_x, full.train_x[:7]) and torch.equal(cut.val_y, full.val_y[:3])
    assert torch.equal(cut.test_x, full.test_x[:3])


@pytest.mark.parametrize("subsets", [{"train_subset": 81, "eval_subset": 20},
                                     {"train_subset": 80, "eval_subset": 21}, {}])
def test_asking_for_more_images_than_the_copy_has_fails(tmp_path, subsets):
    fake_cifar(tmp_path)
    with pytest.raises(DataError, match="at most"):
        load_splits(recipe(**subsets), tmp_path, allow_unverified=True)


def test_missing_root_says_how_to_get_the_data(tmp_path):
    with pytest.raises(DataError) as err:
        load_splits(recipe(), tmp_path / "nowhere")
    message = str(err.value)
    for part in (str(tmp_path / "nowhere" / data.FOLDER), "download",
                 f"cifar10-copy {tmp_path / 'nowhere'}", "synthetic"):
        assert part in message
    with pytest.raises(DataError, match="needs a root folder"):
        load_splits(recipe(), None)


def test_missing_file_is_named(tmp_path):
    fake_cifar(tmp_path)
    (tmp_path / data.FOLDER / "test_batch").unlink()
    with pytest.raises(DataError, match="incomplete: missing test_batch"):
        load_splits(recipe(**SMALL), tmp_path, allow_unverified=True)


@pytest.mark.parametrize("allow", [False, True])
@pytest.mark.parametrize("case", sorted(DAMAGED_COPIES))
def test_a_damaged_copy_names_its_file_in_one_line_whatever_the_flag(tmp_path, capsys, case,
                                                                     allow):
    """A swapped, renamed, foreign or truncated batch file fails its layout check, with
    or without allow_unverified, even with a manifest that vouches for every file's bytes
    (as one written after the damage would)."""
    damage, named = DAMAGED_COPIES[case]
    fake_cifar(tmp_path)
    folder = tmp_path / data.FOLDER
    damage(folder)
    sums = {n: hashlib.sha256((folder / n).read_bytes()).hexdigest() for n in data.MD5}
    (folder / data.MANIFEST).write_text(json.dumps({"format": data.MANIFEST_FORMAT,
                                                    "sha256": sums}))
    with pytest.raises(DataError) as err:
        load_splits(recipe(**SMALL), tmp_path, allow_unverified=allow)
    message = str(err.value)
    assert "\n" not in message and "not what their names say" in message
    for words in named:
        assert words in message


def test_a_pickle_that_names_code_is_refused_without_running_it(tmp_path):
    fake_cifar(tmp_path)
    with open(tmp_path / data.FOLDER / "data_batch_1", "wb") as fh:
        pickle.dump({"data": print}, fh)  # unpickling would look up builtins.print
    with pytest.raises(DataError, match="data_batch_1 is corrupt.*builtins.print"):
        load_splits(recipe(**SMALL), tmp_path, allow_unverified=True)


def test_foreign_contents_are_refused(tmp_path):
    fake_cifar(tmp_path)
    with open(tmp_path / data.FOLDER / "data_batch_2", "wb") as fh:
        pickle.dump({"data": np.zeros((PER_BATCH, 3072), np.uint8), "labels": [10] * PER_BATCH},
                    fh)
    with pytest.raises(DataError, match="data_batch_2 has unexpected contents"):
        load_splits(recipe(**SMALL), tmp_path, allow_unverified=True)


def test_download_failure_says_what_to_do_instead(tmp_path, monkeypatch):
    import torchvision.datasets

    class Offline:
        url = "https://example.invalid/cifar"

        def __init__(self, *args, **kwargs):
            raise urllib.error.URLError("no network")

    monkeypatch.setattr(torchvision.datasets, "CIFAR10", Offline)
    with pytest.raises(DataError, match="no network") as err:
        load_splits(recipe(), tmp_path, download=True)
    assert "data.root" in str(err.value) and "synthetic" in str(err.value)


def test_split_is_fixed_disjoint_and_complete():
    train, val = split_indices()
    assert (len(train), len(val)) == (40_000, 10_000)
    assert np.array_equal(np.sort(np.concatenate([train, val])), np.arange(50_000))
    # pins the definition: numpy RandomState(42).permutation(50000), validation first
    assert val[:5].tolist() == [33553, 9427, 199, 12447, 39489]
    assert train[:5].tolist() == [39087, 30893, 45278, 16398, 13653]
    again_train, again_val = split_indices()
    assert np.array_equal(train, again_train) and np.array_equal(val, again_val)


def test_as_float_scales_to_unit_range():
    x = torch.tensor([0, 51, 255], dtype=torch.uint8)
    assert as_float(x).dtype == torch.float32
    assert as_float(x).tolist() == pytest.approx([0.0, 0.2, 1.0])


def test_synthetic_set_shape_determinism_and_prefix():
    (x, y), (vx, vy), (tx, ty) = synthetic_splits(700, 30, 40)
    assert x.shape == (700, 3, 32, 32) and x.dtype == torch.uint8 and y.dtype == torch.int64
    assert (len(vy), len(ty)) == (30, 40) and set(y.tolist()) == set(range(10))
    (x2, y2), _, _ = synthetic_splits(600, 30, 40)
    assert torch.equal(x[:600], x2) and torch.equal(y[:600], y2)
    assert not torch.equal(x[:30], vx)  # splits are different images


def test_synthetic_set_is_learnable_by_nearest_class_mean():
    (x, y), (vx, vy), _ = synthetic_splits()
    train, val = as_float(x).flatten(1), as_float(vx).flatten(1)
    means = torch.stack([train[y == c].mean(0) for c in range(10)])
    accuracy = (torch.cdist(val, means).argmin(1) == vy).float().mean().item()
    assert accuracy > 0.5  # chance is 0.1


def test_load_splits_synthetic_follows_the_recipe():
    s = load_splits(recipe(dataset="synthetic", train_subset=50, eval_subset=10), "ignored")
    assert (len(s.train_y), len(s.val_y), len(s.test_y)) == (50, 10, 10)
    assert torch.equal(s.train_x, synthetic_splits(50, 10, 10)[0][0])
    assert s.verification == "synthetic"
    default = load_splits(recipe(dataset="synthetic"), None)
    assert (len(default.train_y), len(default.val_y), len(default.test_y)) == (2000, 500, 500)
    assert len(default.train_y) == recipe(dataset="synthetic").n_train


def test_crop_at_pad_offset_is_identity_and_flip_flips():
    x = torch.arange(2 * 3 * 32 * 32, dtype=torch.float32).reshape(2, 3, 32, 32)
    centre = torch.full((2, 2), 4)
    assert torch.equal(crop_flip(x, centre, torch.tensor([False, False])), x)
    flipped = crop_flip(x, centre, torch.tensor([True, False]))
    assert torch.equal(flipped[0], x[0].flip(-1)) and torch.equal(flipped[1], x[1])


def test_reflect_padding_by_hand():
    x = torch.arange(12).reshape(1, 1, 3, 4)  # rows [0..3], [4..7], [8..11]
    no = torch.tensor([False])
    # pad 2: rows reflect to [2,1,0,1,2,1,0], columns to [2,1,0,1,2,3,2,1]
    top_left = crop_flip(x, torch.tensor([[0, 0]]), no, pad=2)
    assert top_left[0, 0].tolist() == [[10, 9, 8, 9], [6, 5, 4, 5], [2, 1, 0, 1]]
    bottom_right = crop_flip(x, torch.tensor([[4, 4]]), no, pad=2)
    assert bottom_right[0, 0].tolist() == [[10, 11, 10, 9], [6, 7, 6, 5], [2, 3, 2, 1]]


def test_crop_flip_matches_torch_reflect_pad():
    x = torch.rand(5, 3, 32, 32)
    offsets = torch.tensor([[0, 8], [8, 0], [3, 5], [4, 4], [7, 1]])
    flips = torch.tensor([True, False, True, False, True])
    padded = F.pad(x, (4, 4, 4, 4), mode="reflect")
    for i, ((dy, dx), flip) in enumerate(zip(offsets.tolist(), flips.tolist(), strict=True)):
        expected = padded[i, :, dy:dy + 32, dx:dx + 32]
        # flip first, then crop: the crop of the flipped image is the flip of the
        # mirrored crop (column offset 8 - dx)
        if flip:
            expected = padded[i, :, dy:dy + 32, 8 - dx:40 - dx].flip(-1)
        assert torch.equal(crop_flip(x[i:i + 1], offsets[i:i + 1], flips[i:i + 1])[0], expected)


def test_augment_draws_a_flip_and_crop_per_image():
    x = torch.randint(0, 256, (1, 64, 3, 32, 32), dtype=torch.uint8)
    draws = epoch_augmentations(64, [torch.Generator().manual_seed(1)])
    out = augment(x, draws)
    assert out.dtype == torch.uint8 and out.shape == x.shape
    found = set()
    for i in range(x.shape[1]):
        matches = [(dy, dx, f) for dy in range(9) for dx in range(9) for f in (False, True)
                   if torch.equal(crop_flip(x[0, i:i + 1], torch.tensor([[dy, dx]]),
                                            torch.tensor([f]))[0], out[0, i])]
        assert matches == [(*draws[0, i, 1:].tolist(), bool(draws[0, i, 0]))]
        found.add(matches[0])
    assert len(found) > 32 and {f for _, _, f in found} == {False, True}


def test_epoch_augmentations_per_run_whatever_the_pack():
    draws = epoch_augmentations(40, [torch.Generator().manual_seed(s) for s in (5, 6, 7)])
    assert draws.shape == (3, 40, 3) and draws.dtype == torch.int64
    assert set(draws[..., 0].unique().tolist()) == {0, 1}
    assert draws[..., 1:].min() >= 0 and draws[..., 1:].max() <= 8
    for i, s in enumerate((5, 6, 7)):  # a run's draws are those it makes alone
        alone = epoch_augmentations(40, [torch.Generator().manual_seed(s)])
        assert torch.equal(draws[i], alone[0])
    other = epoch_augmentations(40, [torch.Generator().manual_seed(s) for s in (5, 99, 7)])
    assert torch.equal(other[0], draws[0]) and not torch.equal(other[1], draws[1])
    x = torch.rand(3, 40, 3, 32, 32)
    out = augment(x, draws)
    for i in range(3):
        assert torch.equal(out[i], augment(x[i:i + 1], draws[i:i + 1])[0])


def test_epoch_permutations_per_run_and_reshuffled():
    gens = [torch.Generator().manual_seed(s) for s in (0, 1)]
    first, second = epoch_permutations(10, gens), epoch_permutations(10, gens)
    assert first.shape == (2, 10)
    for row in (*first, *second):
        assert sorted(row.tolist()) == list(range(10))
    assert not torch.equal(first, second)  # a new order every epoch
    alone = epoch_permutations(10, [torch.Generator().manual_seed(1)])
    assert torch.equal(alone[0], first[1])  # a run's order does not depend on its pack


def test_minibatches_keep_the_last_partial_batch():
    order = torch.arange(20).reshape(2, 10)
    augmentations = torch.arange(60).reshape(2, 10, 3)
    batches = list(minibatches(4, order, augmentations))
    assert len(batches) == math.ceil(10 / 4) == 3
    assert [idx.shape for idx, _ in batches] == [(2, 4), (2, 4), (2, 2)]
    assert torch.equal(torch.cat([idx for idx, _ in batches], dim=1), order)
    assert torch.equal(torch.cat([draws for _, draws in batches], dim=1), augmentations)
    assert [len(inputs) for inputs in minibatches(4, order)] == [1, 1, 1]


def test_run_generators_are_independent_and_deterministic():
    gens = run_generators(42)
    assert set(gens) == {"init", "order", "augment"}
    draws = {k: torch.randint(0, 2**62, (4,), generator=g).tolist() for k, g in gens.items()}
    assert len({tuple(d) for d in draws.values()}) == 3  # distinct streams
    again = run_generators(42)
    assert draws == {k: torch.randint(0, 2**62, (4,), generator=g).tolist()
                     for k, g in again.items()}
    other = run_generators(43)
    assert torch.randint(0, 2**62, (4,), generator=other["init"]).tolist() != draws["init"]
    # the documented derivation: SeedSequence(seed).spawn(3)[k], first 64-bit word
    child = np.random.SeedSequence(42).spawn(3)[2]
    assert gens["augment"].initial_seed() == int(child.generate_state(1, np.uint64)[0])
