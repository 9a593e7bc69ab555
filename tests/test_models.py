import pytest
import torch

from labkit import data, models


def test_shapes():
    assert models.MLP(64, 32, 10)(torch.zeros(5, 64)).shape == (5, 10)
    assert models.MLP(64, 32, 10)(torch.zeros(5, 8, 8)).shape == (5, 10)
    assert models.SmallCNN(1, 10)(torch.zeros(2, 1, 8, 8)).shape == (2, 10)
    assert models.SmallCNN(3, 5)(torch.zeros(2, 3, 32, 32)).shape == (2, 5)
    assert models.count_parameters(models.MLP(4, 8, 2, depth=1)) == 4 * 8 + 8 + 8 * 2 + 2
    with pytest.raises(ValueError):
        models.MLP(depth=0)


def test_mlp_learns_digits():
    torch.manual_seed(0)
    x, y = data.digits()
    x, y = torch.from_numpy(x), torch.from_numpy(y)
    model = models.MLP(64, 64, 10)
    before = models.accuracy(model, x, y)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(60):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    after = models.accuracy(model, x, y)
    assert after > 0.9 > before
    assert model.training  # accuracy() restores the mode
