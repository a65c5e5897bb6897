"""A word-language-model-style loop: an LSTM, batches sliced from one token tensor by a
small get_batch, and a hand-written SGD update (no torch.optim): compute-bound."""
import sys

import torch


class WordModel(torch.nn.Module):
    def __init__(self, vocab: int = 200, hidden: int = 256) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, hidden)
        self.rnn = torch.nn.LSTM(hidden, hidden, num_layers=2)
        self.head = torch.nn.Linear(hidden, vocab)

    def forward(self, x):
        out, _ = self.rnn(self.embed(x))
        return self.head(out)


def get_batch(source, i, bptt=35):
    n = min(bptt, len(source) - 1 - i)
    return source[i:i + n], source[i + 1:i + 1 + n].reshape(-1)


def main() -> None:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    steps = int(sys.argv[1])
    tokens = torch.randint(0, 200, (20000,)).view(-1, 20)  # (time, batch)
    model = WordModel()
    lr = 0.5
    done, i = 0, 0
    while done < steps:
        x, y = get_batch(tokens, i)
        i = (i + 35) % (len(tokens) - 40)
        model.zero_grad()
        out = model(x)
        loss = torch.nn.functional.cross_entropy(out.view(-1, 200), y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-lr)
        done += 1


if __name__ == "__main__":
    main()
