"""Make the bundled demo sets (deterministic; run `make demo` to rebuild).

* ``digits.npz`` — scikit-learn's bundled handwritten digits (1 797 images, 10 classes, no
  download) embedded three ways: raw pixels (``pixels``, 64-d), PCA (``pca16``) and a learned
  linear discriminant projection (``lda9``) fitted on the ``train`` split only, so the
  ``test`` split shows a generalization gap.
* ``many_classes.npz`` — a generated metric-learning-style set: 600 classes of 3-9 items in 32-d,
  two training checkpoints (``epoch_3`` and ``epoch_10``), a ``train``/``test`` split by class,
  a per-item ``confidence`` that tracks how noisy the item is, and ~4 % exact duplicate vectors
  (some across classes) so that ties are real.
* ``training.npz`` — a real training run, in the zero-shot protocol of metric learning: a small
  network (scikit-learn's ``MLPClassifier``, one hidden layer, trained by ``partial_fit``) learns
  digits 0-6 on the ``train`` split; ``test_seen`` holds other items of those classes and
  ``test_unseen`` the never-trained digits 7-9. The embedding is the hidden layer after 0
  (initialisation), 1, 3, 10 and 30 epochs, for two architectures (``mlp32_e*``: 32 units,
  ``mlp64_e*``: 64 units); ``confidence_<method>`` is that checkpoint's largest class probability.
  Trained single-threaded: on one machine the file regenerates bit for bit; on another CPU or BLAS
  kernel the floating-point arrays agree to rounding (tests/core/test_demo_data.py says how closely).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def make_digits(rng: np.random.Generator) -> dict[str, np.ndarray]:
    from sklearn.datasets import load_digits
    from sklearn.decomposition import PCA
    from sklearn.discriminant_analysis import LinearDiscriminantAnalysis

    X, y = load_digits(return_X_y=True)
    split = np.where(rng.random(y.size) < 0.5, "train", "test")
    train = split == "train"
    pca = PCA(n_components=16, random_state=0).fit(X[train])
    lda = LinearDiscriminantAnalysis(n_components=9).fit(X[train], y[train])
    return {
        "embeddings_pixels": X.astype(np.float32),
        "embeddings_pca16": pca.transform(X).astype(np.float32),
        "embeddings_lda9": lda.transform(X).astype(np.float32),
        "labels": y.astype(np.int64),
        "split": split,
        "id": np.array([f"digit-{i:04d}" for i in range(y.size)]),
    }


def make_many_classes(rng: np.random.Generator, n_classes: int = 600, dim: int = 32) -> dict[str, np.ndarray]:
    sizes = rng.integers(3, 10, n_classes)
    labels = np.repeat(np.arange(n_classes), sizes)
    n = labels.size
    split_of_class = np.where(np.arange(n_classes) < n_classes // 2, "train", "test")
    split = split_of_class[labels]
    centers = rng.standard_normal((n_classes, dim))
    hardness = rng.gamma(2.0, 0.5, n)  # per-item noise scale
    noise = rng.standard_normal((n, dim))
    is_train = split == "train"
    # the early checkpoint is noisy everywhere; the late one fits train classes much better than test
    early = centers[labels] + 1.6 * hardness[:, None] * noise
    late_scale = np.where(is_train, 0.45, 0.9)
    late = centers[labels] + late_scale[:, None] * hardness[:, None] * noise
    confidence = 1.0 / (1.0 + hardness) + 0.05 * rng.standard_normal(n)
    # exact duplicates: mostly within a class, a few across classes
    dup_to = rng.choice(n, int(0.04 * n), replace=False)
    same_class_src = np.array([rng.choice(np.nonzero(labels == labels[i])[0]) for i in dup_to])
    cross = rng.random(dup_to.size) < 0.2
    src = np.where(cross, rng.integers(0, n, dup_to.size), same_class_src)
    for emb in (early, late):
        emb[dup_to] = emb[src]
    return {
        "embeddings_epoch_3": early.astype(np.float32),
        "embeddings_epoch_10": late.astype(np.float32),
        "labels": np.array([f"class-{c:03d}" for c in labels]),
        "split": split,
        "confidence": confidence.astype(np.float64),
        "id": np.array([f"item-{i:05d}" for i in range(n)]),
    }


TRAINING_EPOCHS = (0, 1, 3, 10, 30)
TRAINING_FAMILIES = {"mlp32": 32, "mlp64": 64}


def make_training(seed: int = 7) -> dict[str, np.ndarray]:
    import warnings

    from sklearn.datasets import load_digits
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.neural_network import MLPClassifier
    from threadpoolctl import threadpool_limits

    X, y = load_digits(return_X_y=True)
    X = X / 16.0
    rng = np.random.default_rng(seed)
    seen = y <= 6
    split = np.where(~seen, "test_unseen", np.where(rng.random(y.size) < 0.7, "train", "test_seen"))
    train = split == "train"
    out: dict[str, np.ndarray] = {"labels": y.astype(np.int64), "split": split,
                                  "id": np.array([f"digit-{i:04d}" for i in range(y.size)])}
    classes = np.unique(y[train])

    def network(units: int, learning_rate: float) -> MLPClassifier:
        return MLPClassifier(hidden_layer_sizes=(units,), learning_rate_init=learning_rate, batch_size=64,
                             random_state=seed, shuffle=True)

    def checkpoint(name: str, net: MLPClassifier) -> None:
        hidden = np.maximum(X @ net.coefs_[0] + net.intercepts_[0], 0.0)  # the ReLU hidden layer
        out[f"embeddings_{name}"] = hidden.astype(np.float32)
        out[f"confidence_{name}"] = net.predict_proba(X).max(axis=1)

    with threadpool_limits(1), warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        for family, units in TRAINING_FAMILIES.items():
            # epoch 0: the same initial weights (same random_state), one pass at a step too small to move them
            init = network(units, 1e-300)
            init.partial_fit(X[train], y[train], classes=classes)
            checkpoint(f"{family}_e0", init)
            net = network(units, 0.01)
            for epoch in range(1, max(TRAINING_EPOCHS) + 1):
                net.partial_fit(X[train], y[train], classes=classes)
                if epoch in TRAINING_EPOCHS:
                    checkpoint(f"{family}_e{epoch}", net)
    return out


def main() -> None:
    rng = np.random.default_rng(20261122)
    np.savez_compressed(HERE / "digits.npz", **make_digits(rng))
    np.savez_compressed(HERE / "many_classes.npz", **make_many_classes(rng))
    np.savez_compressed(HERE / "training.npz", **make_training())
    for f in ("digits.npz", "many_classes.npz", "training.npz"):
        print(f, (HERE / f).stat().st_size // 1024, "KiB")


if __name__ == "__main__":
    main()
