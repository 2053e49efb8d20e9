"""Make ``digits_runs.npz``: a small real metric-learning experiment with replicate training runs.

The data set for training runs as replicates (a method is a family, a run and a step): three
losses × three seeds × four checkpoints, 36 methods over the same 1 797 items.

* **Data**: scikit-learn's handwritten digits (``load_digits``: 1 797 images of 8 × 8 pixels, 64
  features, 10 classes; bundled with scikit-learn, no download), standardised with the mean and
  standard deviation of the ``train`` items only.
* **Zero-shot split** (the metric-learning protocol for held-out classes): digits 0-6 are split
  70 % ``train`` / 30 % ``test_seen``, stratified by class with a fixed seed; digits 7-9 are all
  ``test_unseen`` and never seen in training.
* **Model**: an MLP 64 -> 128 -> 16 with a ReLU between; the embedding is the 16-d output.
* **Families** (losses of pytorch-metric-learning, Musgrave et al., "A Metric Learning Reality
  Check", ECCV 2020): ``triplet`` (``TripletMarginLoss`` on semi-hard triplets from
  ``TripletMarginMiner``; Schroff et al., "FaceNet", CVPR 2015), ``proxyanchor``
  (``ProxyAnchorLoss``, 7 classes, 16-d; Kim et al., "Proxy Anchor Loss for Deep Metric Learning",
  CVPR 2020; the proxies are parameters of the loss and get their own optimizer parameter group
  with a larger learning rate, as the paper and the library's documentation do) and ``multisim``
  (``MultiSimilarityLoss`` with ``MultiSimilarityMiner``; Wang et al., "Multi-Similarity Loss with
  General Pair Weighting for Deep Metric Learning", CVPR 2019).
* **Runs**: seeds 0, 1, 2. The seed sets the network's initialisation (``torch.manual_seed``) and
  the order of the batches (the class-balanced ``MPerClassSampler`` draws from NumPy's global
  generator, ``np.random.seed``). The network is built before anything else draws from the
  generator, so the three losses of one seed start from the same weights and see the same batches:
  their epoch-0 checkpoints are identical, and between losses of one seed only the loss differs.
* **Training**: Adam, learning rate 1e-3 (the proxies 1e-2); batches of 63 = 9 items of each of the
  7 training classes; an epoch is as many sampled items as there are training items, rounded down
  to whole batches (884 training items: 14 batches).
* **Checkpoints** after epochs 0 (untrained), 1, 3 and 10; every checkpoint embeds all 1 797 items.

Methods are named ``<loss>_seed<N>_e<epoch>`` (``triplet_seed0_e10``); ``digits_runs_design.csv``
lists each method's ``family`` (the loss), ``run`` (``seed<N>``) and ``step`` (the epoch).
Embeddings are stored as float16 (the loaders widen them to float32) to keep the file small.

Needs PyTorch and pytorch-metric-learning, which are not dependencies of the project; use a
separate environment::

    python3 -m venv /tmp/venv-torch
    /tmp/venv-torch/bin/pip install torch==2.13.0 pytorch-metric-learning scikit-learn numpy
    /tmp/venv-torch/bin/python demo_data/make_runs_data.py

Deterministic: single-threaded, ``torch.use_deterministic_algorithms(True)``, every random draw
seeded. On one machine and library version the file regenerates bit for bit; another CPU, BLAS
kernel or PyTorch version may change the floating-point values by rounding, which training amplifies
over its steps, so tests check the file's structure, never its bits.
"""

from __future__ import annotations

import csv
import time
from pathlib import Path

import numpy as np
import torch
from pytorch_metric_learning import losses, miners, samplers
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

HERE = Path(__file__).resolve().parent
OUT = HERE / "digits_runs.npz"
DESIGN = HERE / "digits_runs_design.csv"

LOSSES = ("triplet", "proxyanchor", "multisim")
SEEDS = (0, 1, 2)
CHECKPOINTS = (0, 1, 3, 10)  # epochs; 0 = the untrained network
SEEN_CLASSES = tuple(range(7))
SPLIT_SEED = 0
PER_CLASS = 9  # batch = 9 items × 7 classes = 63: every class in every batch
LR, PROXY_LR = 1e-3, 1e-2
EMBEDDING_DIM = 16


def method_name(loss: str, seed: int, epoch: int) -> str:
    return f"{loss}_seed{seed}_e{epoch}"


def zero_shot_split(y: np.ndarray) -> np.ndarray:
    """``train`` / ``test_seen`` (70 / 30 %, stratified) for the seen classes, ``test_unseen`` for the rest."""
    split = np.full(y.size, "test_unseen", dtype="<U11")
    seen = np.flatnonzero(np.isin(y, SEEN_CLASSES))
    train, test = train_test_split(seen, train_size=0.7, stratify=y[seen], random_state=SPLIT_SEED)
    split[train] = "train"
    split[test] = "test_seen"
    return split


def network() -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, EMBEDDING_DIM))


def loss_and_miner(loss: str) -> tuple[torch.nn.Module, torch.nn.Module | None]:
    if loss == "triplet":
        return losses.TripletMarginLoss(margin=0.2), miners.TripletMarginMiner(margin=0.2, type_of_triplets="semihard")
    if loss == "proxyanchor":
        return losses.ProxyAnchorLoss(num_classes=len(SEEN_CLASSES), embedding_size=EMBEDDING_DIM), None
    if loss == "multisim":
        return losses.MultiSimilarityLoss(), miners.MultiSimilarityMiner()
    raise ValueError(f"unknown loss {loss!r}")


def train_run(loss: str, seed: int, X: torch.Tensor, y: torch.Tensor, train: np.ndarray) -> dict[int, np.ndarray]:
    """One training run: epoch -> embeddings of all items (float32) at that checkpoint."""
    torch.manual_seed(seed)
    np.random.seed(seed)  # MPerClassSampler draws from NumPy's global generator
    model = network()  # first draw after seeding: the same initial weights for every loss of this seed
    loss_fn, miner = loss_and_miner(loss)
    groups = [{"params": model.parameters(), "lr": LR}]
    if any(True for _ in loss_fn.parameters()):  # ProxyAnchor's proxies
        groups.append({"params": loss_fn.parameters(), "lr": PROXY_LR})
    optimizer = torch.optim.Adam(groups)
    X_train, y_train = X[train], y[train]
    batch = PER_CLASS * len(SEEN_CLASSES)
    sampler = samplers.MPerClassSampler(y_train, m=PER_CLASS, batch_size=batch,
                                        length_before_new_iter=int(train.sum()))
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(X_train, y_train), batch_size=batch,
                                         sampler=sampler, drop_last=True)

    def embed() -> np.ndarray:
        model.eval()
        with torch.no_grad():
            out = model(X).numpy().copy()
        model.train()
        return out

    checkpoints = {0: embed()}
    for epoch in range(1, max(CHECKPOINTS) + 1):
        for xb, yb in loader:
            optimizer.zero_grad()
            emb = model(xb)
            loss_value = loss_fn(emb, yb, miner(emb, yb)) if miner is not None else loss_fn(emb, yb)
            loss_value.backward()
            optimizer.step()
        if epoch in CHECKPOINTS:
            checkpoints[epoch] = embed()
    return checkpoints


def make_runs() -> tuple[dict[str, np.ndarray], list[dict[str, object]]]:
    """The arrays of ``digits_runs.npz`` and the rows of its design table."""
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    X_raw, y_raw = load_digits(return_X_y=True)
    split = zero_shot_split(y_raw)
    train = split == "train"
    mean, sd = X_raw[train].mean(axis=0), X_raw[train].std(axis=0)
    sd[sd == 0] = 1.0  # pixels that are blank in every training image stay 0 rather than 0/0
    X = torch.from_numpy(((X_raw - mean) / sd).astype(np.float32))
    y = torch.from_numpy(y_raw.astype(np.int64))
    arrays: dict[str, np.ndarray] = {}
    design: list[dict[str, object]] = []
    for loss in LOSSES:
        for seed in SEEDS:
            for epoch, emb in train_run(loss, seed, X, y, train).items():
                name = method_name(loss, seed, epoch)
                arrays[f"embeddings_{name}"] = emb.astype(np.float16)
                design.append({"method": name, "family": loss, "run": f"seed{seed}", "step": epoch})
    arrays["labels"] = y_raw.astype(np.int64)
    arrays["split"] = split
    arrays["id"] = np.array([f"digit-{i:04d}" for i in range(y_raw.size)])
    return arrays, design


def main() -> None:
    start = time.perf_counter()
    arrays, design = make_runs()
    np.savez_compressed(OUT, **arrays)
    with DESIGN.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["method", "family", "run", "step"], lineterminator="\n")
        writer.writeheader()
        writer.writerows(design)
    print(f"{OUT.name}: {len(design)} methods, {OUT.stat().st_size / 1e6:.2f} MB; {DESIGN.name}; "
          f"{time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
