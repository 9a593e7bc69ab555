"""The capstone's recommender plumbing: seeded interaction logs, a time split, ranking metrics.

:func:`interactions` draws a log with structure a model can learn and a baseline can partly
exploit: items belong to categories and have a skewed popularity; each user prefers a category
(their latent vector sits near its centre); every event picks an item with probability
``softmax(u . v_i + popularity_i)`` (one cumulative distribution per user), at a time drawn
uniformly over ``days``. Everything is a function of the seed.

The metrics rank every item for each evaluated user, leave out what the user already had in
training, and compare the top ``k`` with the items the user took in the held-out period:
``recall@k`` = hits / min(k, number of held-out items) and ``NDCG@k`` with binary gains. The
model, the popularity baseline and the random baseline all go through :func:`evaluate`.

Used in: 11.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

DAY_S = 86_400


def interactions(
    n_users: int,
    n_items: int,
    n_events: int,
    *,
    n_categories: int = 8,
    days: int = 28,
    dim: int = 8,
    seed: int = 0,
) -> dict[str, np.ndarray]:
    """An interaction log as columns ``user``, ``item``, ``category`` (the item's) and ``ts``
    (seconds from the start, sorted), ``n_events`` rows."""
    for name, value in (("n_users", n_users), ("n_items", n_items), ("n_events", n_events)):
        if value < 1:
            raise ValueError(f"{name} must be at least 1, got {value}")
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(n_categories, dim))
    item_cat = rng.integers(n_categories, size=n_items)
    item_vec = centres[item_cat] + 0.6 * rng.normal(size=(n_items, dim))
    user_vec = centres[rng.integers(n_categories, size=n_users)] + 0.6 * rng.normal(
        size=(n_users, dim)
    )
    # Popularity: a Zipf-like bias over a random order of the items.
    popularity = -1.1 * np.log1p(rng.permutation(n_items)).astype(np.float64)
    activity = rng.lognormal(0.0, 1.0, size=n_users)
    users = rng.choice(n_users, size=n_events, p=activity / activity.sum())
    # Each user's events draw items from that user's softmax over all items: one cumulative
    # distribution per user (users in batches), then a binary search per draw.
    counts = np.bincount(users, minlength=n_users)
    by_user = np.argsort(users, kind="stable")
    items = np.empty(n_events, dtype=np.int64)
    scale = 1.5 / np.sqrt(dim)
    batch = max(1, 2_000_000 // n_items)
    pos = 0
    for a in range(0, n_users, batch):
        logits = user_vec[a : a + batch] @ item_vec.T * scale + popularity
        cdf = np.cumsum(np.exp(logits - logits.max(axis=1, keepdims=True)), axis=1)
        for row, k in enumerate(counts[a : a + batch]):
            if k:
                draws = rng.random(k) * cdf[row, -1]
                items[by_user[pos : pos + k]] = np.searchsorted(cdf[row], draws, side="right")
                pos += k
    np.minimum(items, n_items - 1, out=items)
    ts = np.sort(rng.uniform(0, days * DAY_S, size=n_events)).astype(np.int64)
    return {
        "user": users.astype(np.int64),
        "item": items,
        "category": item_cat[items].astype(np.int64),
        "ts": ts,
    }


def time_cutoff(ts: np.ndarray, valid_fraction: float) -> int:
    """The timestamp that leaves the last ``valid_fraction`` of events for validation."""
    if not 0 < valid_fraction < 1:
        raise ValueError(f"valid_fraction must be in (0, 1), got {valid_fraction}")
    ordered = np.sort(np.asarray(ts))
    return int(ordered[min(len(ordered) - 1, round(len(ordered) * (1 - valid_fraction)))])


def held_out(
    train_users: np.ndarray,
    train_items: np.ndarray,
    *,
    valid_users: np.ndarray,
    valid_items: np.ndarray,
) -> dict[int, np.ndarray]:
    """Each user's held-out items that are new to them (not in their training events), for the
    users that have training events: the set the metrics score against."""
    seen = set(zip(train_users.tolist(), train_items.tolist(), strict=True))
    known = set(train_users.tolist())
    truth: dict[int, set[int]] = {}
    for u, i in zip(valid_users.tolist(), valid_items.tolist(), strict=True):
        if u in known and (u, i) not in seen:
            truth.setdefault(u, set()).add(i)
    return {u: np.array(sorted(s)) for u, s in sorted(truth.items())}


def seen_items(users: np.ndarray, items: np.ndarray) -> dict[int, np.ndarray]:
    """Each user's distinct items (their training history)."""
    order = np.lexsort((items, users))
    u, i = users[order], items[order]
    out: dict[int, np.ndarray] = {}
    bounds = np.flatnonzero(np.diff(u)) + 1
    for part_u, part_i in zip(np.split(u, bounds), np.split(i, bounds), strict=True):
        if len(part_u):
            out[int(part_u[0])] = np.unique(part_i)
    return out


def top_k(
    scores: np.ndarray, users: Sequence[int], seen: dict[int, np.ndarray], *, k: int
) -> np.ndarray:
    """The ``k`` best-scored items per user (rows of ``scores`` follow ``users``), each user's
    ``seen`` items left out."""
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    scores = np.array(scores, dtype=np.float64, copy=True)
    for row, u in enumerate(users):
        done = seen.get(int(u))
        if done is not None and len(done):
            scores[row, done] = -np.inf
    k = min(k, scores.shape[1])
    part = np.argpartition(-scores, k - 1, axis=1)[:, :k]
    order = np.argsort(-np.take_along_axis(scores, part, axis=1), axis=1, kind="stable")
    return np.take_along_axis(part, order, axis=1)


def recall_at_k(ranked: np.ndarray, truth: Sequence[np.ndarray]) -> float:
    """Mean over users of hits in the top k / min(k, number of held-out items)."""
    k = ranked.shape[1]
    values = [np.isin(row, t).sum() / min(k, len(t)) for row, t in zip(ranked, truth, strict=True)]
    return float(np.mean(values)) if values else 0.0


def ndcg_at_k(ranked: np.ndarray, truth: Sequence[np.ndarray]) -> float:
    """Mean over users of DCG@k / ideal DCG@k, with gain 1 for a held-out item."""
    k = ranked.shape[1]
    discounts = 1.0 / np.log2(np.arange(2, k + 2))
    values = []
    for row, t in zip(ranked, truth, strict=True):
        dcg = float((np.isin(row, t) * discounts).sum())
        ideal = float(discounts[: min(k, len(t))].sum())
        values.append(dcg / ideal)
    return float(np.mean(values)) if values else 0.0


def evaluate(
    scores: np.ndarray,
    users: Sequence[int],
    truth: dict[int, np.ndarray],
    *,
    seen: dict[int, np.ndarray],
    k: int,
) -> dict[str, float]:
    """``recall@k`` and ``NDCG@k`` of a score matrix (one row per user of ``users``), ranked a
    few thousand rows at a time (a float64 copy of a 50k x 10k matrix would be 4 GB)."""
    chunk = 2048
    ranked = (
        np.concatenate(
            [
                top_k(scores[a : a + chunk], users[a : a + chunk], seen, k=k)
                for a in range(0, len(users), chunk)
            ]
        )
        if len(users)
        else np.zeros((0, k), dtype=np.int64)
    )
    wanted = [truth[int(u)] for u in users]
    return {"recall": recall_at_k(ranked, wanted), "ndcg": ndcg_at_k(ranked, wanted)}


def popularity_scores(train_items: np.ndarray, n_items: int, n_users: int) -> np.ndarray:
    """The popularity baseline: every user gets the items ranked by their training count."""
    counts = np.bincount(train_items, minlength=n_items).astype(np.float64)
    return np.broadcast_to(counts, (n_users, n_items))


def random_scores(n_users: int, n_items: int, seed: int = 0) -> np.ndarray:
    """The random baseline: independent uniform scores."""
    return np.random.default_rng(seed).random((n_users, n_items))


def negatives(
    batch: dict[str, np.ndarray], *, n_items: int, n_negatives: int, seed: int
) -> dict[str, Any]:
    """A batch of positive ``user``/``item`` rows plus ``n_negatives`` random items per row,
    labelled 1 and 0 (``label``). The draw depends on the seed and the batch's first row."""
    users = np.asarray(batch["user"], dtype=np.int64)
    items = np.asarray(batch["item"], dtype=np.int64)
    first = int(batch["ts"][0]) if "ts" in batch and len(batch["ts"]) else 0
    rng = np.random.default_rng([seed, first, len(users)])
    neg_items = rng.integers(n_items, size=len(users) * n_negatives)
    return {
        "user": np.concatenate([users, np.repeat(users, n_negatives)]),
        "item": np.concatenate([items, neg_items]),
        "label": np.concatenate(
            [np.ones(len(users), np.float32), np.zeros(len(neg_items), np.float32)]
        ),
    }
