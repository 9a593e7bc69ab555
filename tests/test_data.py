import numpy as np
import pytest

from labkit import data


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("LABKIT_DATA_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_classification_is_seeded_and_shaped():
    x, y = data.classification(100, n_features=8, n_classes=3, seed=1)
    assert x.shape == (100, 8) and x.dtype == np.float32
    assert y.shape == (100,) and y.dtype == np.int64 and set(y) <= {0, 1, 2}
    x2, y2 = data.classification(100, n_features=8, n_classes=3, seed=1)
    assert np.array_equal(x, x2) and np.array_equal(y, y2)
    x3, _ = data.classification(100, n_features=8, n_classes=3, seed=2)
    assert not np.array_equal(x, x3)


def test_classification_is_learnable():
    from sklearn.linear_model import LogisticRegression

    x, y = data.classification(4000, n_features=32, n_classes=4, seed=0)
    acc = LogisticRegression(max_iter=500).fit(x[:3000], y[:3000]).score(x[3000:], y[3000:])
    assert 0.6 < acc < 0.999  # learnable, not trivial (chance is 0.25)


def test_images_and_tokens_shapes_and_determinism():
    x, y = data.images(20, size=16, channels=3, n_classes=5, seed=0)
    assert x.shape == (20, 3, 16, 16) and x.dtype == np.float32 and y.max() < 5
    assert np.array_equal(x, data.images(20, size=16, channels=3, n_classes=5, seed=0)[0])
    t = data.tokens(10, seq_len=12, vocab=50, seed=0)
    assert t.shape == (10, 12) and t.min() >= 0 and t.max() < 50
    assert np.array_equal(t, data.tokens(10, seq_len=12, vocab=50, seed=0))


def test_tokens_follow_the_chain():
    t = data.tokens(200, seq_len=32, vocab=64, seed=0)
    pairs = {(a, b) for row in t for a, b in zip(row[:-1], row[1:], strict=True)}
    assert len(pairs) < 0.5 * 64 * 64  # far fewer transitions than uniform noise would give


@pytest.mark.parametrize(
    "call",
    [
        lambda: data.classification(0),
        lambda: data.classification(10, n_classes=1),
        lambda: data.images(-1),
        lambda: data.tokens(5, seq_len=0),
        lambda: data.classification(True),
    ],
)
def test_bad_sizes_raise(call):
    with pytest.raises(ValueError):
        call()


def test_same_seed_same_bytes(tmp_path):
    x, y = data.classification(500, seed=4)
    a = data.write_parquet(data.to_table({"x": x, "y": y}), tmp_path / "a.parquet")
    x, y = data.classification(500, seed=4)
    b = data.write_parquet(data.to_table({"x": x, "y": y}), tmp_path / "b.parquet")
    assert a.read_bytes() == b.read_bytes()
    x, y = data.classification(500, seed=5)
    c = data.write_parquet(data.to_table({"x": x, "y": y}), tmp_path / "c.parquet")
    assert a.read_bytes() != c.read_bytes()


def test_cached_builds_once_and_round_trips(cache):
    calls = []

    def build():
        calls.append(1)
        x, y = data.classification(50, n_features=4, seed=0)
        return {"x": x, "y": y}

    path = data.cached("demo", build)
    assert path.parent == cache and path.is_file()
    assert data.cached("demo", build) == path
    assert len(calls) == 1
    data.cached("demo", build, refresh=True)
    assert len(calls) == 2
    x, y = data.read_xy(path)
    ex, ey = data.classification(50, n_features=4, seed=0)
    assert np.array_equal(x, ex) and np.array_equal(y, ey)
    with pytest.raises(ValueError):
        data.cached("../evil", build)


def test_shards_split_and_read_back(cache):
    folder = data.classification_shards(1000, n_files=4, n_features=6, seed=1)
    files = sorted(folder.glob("*.parquet"))
    assert [f.name for f in files] == [f"part-{k:05d}.parquet" for k in range(4)]
    x, y = data.read_xy(folder)
    ex, ey = data.classification(1000, 6, 4, seed=1)
    assert np.array_equal(x, ex) and np.array_equal(y, ey)
    mtime = files[0].stat().st_mtime_ns
    assert data.classification_shards(1000, n_files=4, n_features=6, seed=1) == folder
    assert files[0].stat().st_mtime_ns == mtime  # cached, not rewritten


def test_numpy_columns_turns_a_fixed_size_list_into_2d():
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    y = np.arange(4)
    cols = data.numpy_columns(data.to_table({"x": x, "y": y}))
    assert list(cols) == ["x", "y"]
    np.testing.assert_array_equal(cols["x"], x)
    np.testing.assert_array_equal(cols["y"], y)
