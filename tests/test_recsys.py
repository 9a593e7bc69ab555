"""The capstone's data and metrics: seeded logs with structure, a split without leakage, and
ranking metrics checked on cases worked by hand."""

import numpy as np
import pytest
import torch

from labkit import recsys
from labkit.models import MatrixFactorization


def test_interactions_are_seeded_sorted_and_skewed():
    a = recsys.interactions(200, 100, 5000, seed=3)
    b = recsys.interactions(200, 100, 5000, seed=3)
    assert all(np.array_equal(a[k], b[k]) for k in a)
    assert set(a) == {"user", "item", "category", "ts"}
    assert np.all(np.diff(a["ts"]) >= 0)
    assert a["item"].min() >= 0 and a["item"].max() < 100
    counts = np.sort(np.bincount(a["item"], minlength=100))[::-1]
    assert counts[:10].sum() > 3 * counts[-50:].sum()  # popularity is skewed
    # Users prefer a category: a user's most frequent category beats a uniform share.
    top = [
        np.bincount(a["category"][a["user"] == u]).max() / (a["user"] == u).sum()
        for u in np.unique(a["user"])
        if (a["user"] == u).sum() >= 20
    ]
    assert np.mean(top) > 2 / 8
    with pytest.raises(ValueError, match="n_items"):
        recsys.interactions(10, 0, 10)


def test_time_split_leaves_the_last_fraction_and_truth_has_only_new_items():
    ts = np.arange(100)
    cut = recsys.time_cutoff(ts, 0.2)
    assert (ts < cut).sum() == 80
    with pytest.raises(ValueError):
        recsys.time_cutoff(ts, 1.0)
    truth = recsys.held_out(
        np.array([0, 0, 1]),
        np.array([5, 6, 7]),
        valid_users=np.array([0, 0, 1, 2]),
        valid_items=np.array([5, 8, 9, 1]),
    )
    assert {u: t.tolist() for u, t in truth.items()} == {0: [8], 1: [9]}  # 5 seen; user 2 unknown


def test_metrics_on_hand_worked_cases():
    scores = np.array([[0.9, 0.8, 0.1, 0.7], [0.1, 0.2, 0.3, 0.4]])
    seen = {0: np.array([0])}  # user 0 already had item 0: it is not recommended again
    ranked = recsys.top_k(scores, [0, 1], seen, k=2)
    assert ranked.tolist() == [[1, 3], [3, 2]]
    truth = [np.array([3]), np.array([0, 1])]
    assert recsys.recall_at_k(ranked, truth) == pytest.approx((1 / 1 + 0 / 2) / 2)
    # user 0: hit at rank 2 -> (1/log2(3)) / 1; user 1: no hit -> 0
    assert recsys.ndcg_at_k(ranked, truth) == pytest.approx((1 / np.log2(3)) / 2)
    result = recsys.evaluate(scores, [0, 1], {0: truth[0], 1: truth[1]}, seen=seen, k=2)
    assert result == {"recall": pytest.approx(0.5), "ndcg": pytest.approx(0.5 / np.log2(3))}


def test_baselines_and_negatives():
    pop = recsys.popularity_scores(np.array([2, 2, 1]), n_items=3, n_users=2)
    assert pop.shape == (2, 3) and pop[1].tolist() == [0, 1, 2]
    rnd = recsys.random_scores(2, 3, seed=1)
    assert np.array_equal(rnd, recsys.random_scores(2, 3, seed=1))
    batch = {"user": np.array([4, 5]), "item": np.array([1, 2]), "ts": np.array([10, 11])}
    out = recsys.negatives(batch, n_items=7, n_negatives=3, seed=0)
    assert out["user"].tolist() == [4, 5, 4, 4, 4, 5, 5, 5]
    assert out["label"].tolist() == [1, 1, 0, 0, 0, 0, 0, 0]
    assert out["item"][:2].tolist() == [1, 2] and out["item"].max() < 7
    again = recsys.negatives(batch, n_items=7, n_negatives=3, seed=0)
    assert np.array_equal(out["item"], again["item"])


def test_matrix_factorization_learns_the_log_better_than_popularity():
    cols = recsys.interactions(300, 120, 12_000, seed=0)
    cut = recsys.time_cutoff(cols["ts"], 0.2)
    tr = cols["ts"] < cut
    truth = recsys.held_out(
        cols["user"][tr],
        cols["item"][tr],
        valid_users=cols["user"][~tr],
        valid_items=cols["item"][~tr],
    )
    seen = recsys.seen_items(cols["user"][tr], cols["item"][tr])
    users = np.array(sorted(truth))
    torch.manual_seed(0)
    model = MatrixFactorization(300, 120, dim=16)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    for epoch in range(4):
        b = recsys.negatives(
            {"user": cols["user"][tr], "item": cols["item"][tr]},
            n_items=120,
            n_negatives=4,
            seed=epoch,
        )
        u, i, y = (torch.as_tensor(b[k]) for k in ("user", "item", "label"))
        for idx in torch.randperm(len(u)).split(512):
            optimizer.zero_grad()
            loss = torch.nn.functional.binary_cross_entropy_with_logits(
                model(u[idx], i[idx]), y[idx]
            )
            loss.backward()
            optimizer.step()
    scores = model.scores(torch.as_tensor(users)).numpy()
    assert scores.shape == (len(users), 120)
    mf = recsys.evaluate(scores, users, truth, seen=seen, k=10)
    pop = recsys.evaluate(
        recsys.popularity_scores(cols["item"][tr], 120, len(users)), users, truth, seen=seen, k=10
    )
    assert mf["recall"] > pop["recall"]
