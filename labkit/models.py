"""The small torch models the lessons share (sized for 2 CPU cores at smoke, a GPU at full).

Used in: 06-09, 11-13, lab_data, lab_lm.
"""

from __future__ import annotations

import torch
from torch import nn


class MLP(nn.Module):
    """A plain multi-layer perceptron for tabular features (e.g. digits' 64 pixels)."""

    def __init__(
        self, in_features: int = 64, hidden: int = 128, n_classes: int = 10, *, depth: int = 2
    ):
        super().__init__()
        if depth < 1:
            raise ValueError(f"depth must be >= 1, got {depth}")
        layers: list[nn.Module] = []
        width = in_features
        for _ in range(depth):
            layers += [nn.Linear(width, hidden), nn.ReLU()]
            width = hidden
        layers.append(nn.Linear(width, n_classes))
        self.net = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x.flatten(1))


class SmallCNN(nn.Module):
    """Two conv blocks and a linear head, for small images (8x8 digits up to 32x32 synthetic)."""

    def __init__(self, channels: int = 1, n_classes: int = 10, width: int = 32):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(channels, width, 3, padding=1),
            nn.ReLU(),
            nn.Conv2d(width, width * 2, 3, padding=1),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(4),
        )
        self.head = nn.Linear(width * 2 * 16, n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x).flatten(1))


def count_parameters(model: nn.Module) -> int:
    """Number of trainable parameters."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def accuracy(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    """Fraction of correct predictions (evaluation mode, no gradients)."""
    was_training = model.training
    model.eval()
    with torch.no_grad():
        acc = (model(x).argmax(dim=1) == y).float().mean().item()
    model.train(was_training)
    return acc


class _Block(nn.Module):
    def __init__(self, c_in: int, c_out: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(c_out)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(c_out)
        self.skip = (
            nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride, bias=False), nn.BatchNorm2d(c_out))
            if stride != 1 or c_in != c_out
            else nn.Identity()
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(out)) + self.skip(x))


class ResNetSmall(nn.Module):
    """A ResNet-style CNN (3 stages of residual blocks) for 32x32 images; width sets its size."""

    def __init__(self, channels: int = 3, n_classes: int = 10, width: int = 64, *, blocks: int = 2):
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(channels, width, 3, 1, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU()
        )
        layers, c = [], width
        for stage, stride in enumerate((1, 2, 2)):
            c_out = width * 2**stage
            for b in range(blocks):
                layers.append(_Block(c, c_out, stride if b == 0 else 1))
                c = c_out
        self.layers = nn.Sequential(*layers)
        self.head = nn.Linear(c, n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.layers(self.stem(x)).mean(dim=(2, 3)))


class _DecoderBlock(nn.Module):
    def __init__(self, d_model: int, heads: int):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=False)
        self.proj = nn.Linear(d_model, d_model, bias=False)
        self.ln2 = nn.LayerNorm(d_model)
        self.fc = nn.Linear(d_model, 4 * d_model, bias=False)
        self.out = nn.Linear(4 * d_model, d_model, bias=False)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        b, t, d = h.shape
        q, k, v = self.qkv(self.ln1(h)).view(b, t, 3, self.heads, d // self.heads).unbind(2)
        att = nn.functional.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True
        )
        h = h + self.proj(att.transpose(1, 2).reshape(b, t, d))
        return h + self.out(nn.functional.gelu(self.fc(self.ln2(h)), approximate="tanh"))


class GPT(nn.Module):
    """A GPT-style decoder: pre-norm blocks, fused QKV, causal ``scaled_dot_product_attention``.

    Sized for tensor cores at ``full`` (width a multiple of 64, head size 64 or 128); the same
    code runs tiny on a CPU. Bias-free linears, as in current LLMs.
    """

    def __init__(
        self,
        vocab: int = 256,
        d_model: int = 128,
        heads: int = 4,
        *,
        layers: int = 2,
        seq_len: int = 64,
    ):
        super().__init__()
        if d_model % heads:
            raise ValueError(f"d_model={d_model} must be a multiple of heads={heads}")
        self.embed = nn.Embedding(vocab, d_model)
        self.pos = nn.Embedding(seq_len, d_model)
        self.blocks = nn.ModuleList(_DecoderBlock(d_model, heads) for _ in range(layers))
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab, bias=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(tokens.shape[1], device=tokens.device)
        h = self.embed(tokens) + self.pos(positions)
        for block in self.blocks:
            h = block(h)
        return self.head(self.norm(h))


class MatrixFactorization(nn.Module):
    """A user vector and an item vector per id, plus an item bias: the score of a (user, item)
    pair is their dot product plus the bias (a logit: 'would this user take this item?')."""

    def __init__(self, n_users: int, n_items: int, dim: int = 32):
        super().__init__()
        self.user = nn.Embedding(n_users, dim)
        self.item = nn.Embedding(n_items, dim)
        self.item_bias = nn.Embedding(n_items, 1)
        for table in (self.user, self.item):
            nn.init.normal_(table.weight, std=0.1)
        nn.init.zeros_(self.item_bias.weight)

    def forward(self, user: torch.Tensor, item: torch.Tensor) -> torch.Tensor:
        dot = (self.user(user) * self.item(item)).sum(-1)
        return dot + self.item_bias(item).squeeze(-1)

    @torch.no_grad()
    def scores(self, users: torch.Tensor) -> torch.Tensor:
        """Every item's score for each of ``users``: a ``(len(users), n_items)`` matrix."""
        return self.user(users) @ self.item.weight.T + self.item_bias.weight.T
