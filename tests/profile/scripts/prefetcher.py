"""A custom background prefetcher (a thread and a queue, no DataLoader) that cannot keep
up: the loop waits in Prefetcher.__next__: input-bound."""
import queue
import sys
import threading
import time

import torch


class Prefetcher:
    def __init__(self, make, depth: int = 2) -> None:
        self.q: queue.Queue = queue.Queue(depth)
        self.make = make
        threading.Thread(target=self._fill, daemon=True).start()

    def _fill(self) -> None:
        while True:
            self.q.put(self.make())

    def __iter__(self):
        return self

    def __next__(self):
        return self.q.get()


def slow_source():
    time.sleep(0.03)  # reading from a slow remote store
    return torch.randn(32, 64), torch.randint(0, 10, (32,))


def main() -> None:
    torch.set_num_threads(1)
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    batches = Prefetcher(slow_source)
    for step, (x, y) in enumerate(batches):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step + 1 >= int(sys.argv[1]):
            break


if __name__ == "__main__":
    main()
