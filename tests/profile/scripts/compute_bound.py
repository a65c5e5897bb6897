"""Planted scenario: compute-bound. Data is ready in memory; big matmuls dominate."""
import sys

import torch
from torch.utils.data import DataLoader, TensorDataset


def main() -> None:
    torch.set_num_threads(1)  # steadier timings on a shared machine
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(1024, 512), torch.randint(0, 10, (1024,)))
    model = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.ReLU(),
                                torch.nn.Linear(1024, 1024), torch.nn.ReLU(),
                                torch.nn.Linear(1024, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = DataLoader(data, batch_size=256, shuffle=True)
    done = 0
    while done < int(sys.argv[1]):
        for x, y in loader:
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            done += 1
            if done >= int(sys.argv[1]):
                break


if __name__ == "__main__":
    main()
