"""A user's PyTorch training loop in a module of its own, beside the workflow that calls it (test_body_framework)."""

import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = nn.Linear(2, 1)


def fit(steps: int = 1) -> float:
    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loss = model.layer(torch.ones(1, 2)).sum()
    loss.backward()
    optimizer.step()
    return float(loss) * steps
