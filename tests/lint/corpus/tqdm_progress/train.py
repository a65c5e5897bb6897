"""A text classifier trained with a tqdm progress bar that shows the loss on every step
(`pbar.set_postfix(loss=loss.item())`) -- the most common per-step sync in the wild."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
from tqdm import tqdm


class BagOfWords(nn.Module):
    def __init__(self, vocab, dim, classes):
        super().__init__()
        self.emb = nn.EmbeddingBag(vocab, dim)
        self.fc = nn.Linear(dim, classes)

    def forward(self, tokens):
        return self.fc(self.emb(tokens))


def train(model, loader, optimizer, epochs, device):
    criterion = nn.CrossEntropyLoss()
    for epoch in range(epochs):
        model.train()
        pbar = tqdm(loader, desc=f"epoch {epoch}")
        for tokens, labels in pbar:  # want: LT006 LT011
            tokens = tokens.to(device, non_blocking=True)
            labels = labels.to(device, non_blocking=True)
            optimizer.zero_grad(set_to_none=True)
            loss = criterion(model(tokens), labels)
            loss.backward()
            optimizer.step()
            pbar.set_postfix(loss=loss.item())  # want: LT001
        pbar.close()


@torch.inference_mode()
def evaluate(model, loader, device):
    model.eval()
    correct = torch.zeros((), device=device)
    for tokens, labels in tqdm(loader, desc="eval", leave=False):
        tokens = tokens.to(device, non_blocking=True)
        labels = labels.to(device, non_blocking=True)
        correct += (model(tokens).argmax(1) == labels).sum()
    return correct.item() / len(loader.dataset)


def main():
    device = "cuda"
    tokens = torch.randint(0, 20000, (50000, 64))
    labels = torch.randint(0, 4, (50000,))
    ds = TensorDataset(tokens, labels)
    train_loader = DataLoader(ds, batch_size=256, shuffle=True, num_workers=2,  # want: LT004
                              pin_memory=True)
    test_loader = DataLoader(ds, batch_size=1024, num_workers=2, pin_memory=True,
                             persistent_workers=True)
    model = BagOfWords(20000, 128, 4).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    train(model, train_loader, optimizer, epochs=10, device=device)
    print(f"accuracy {evaluate(model, test_loader, device):.3f}")


if __name__ == "__main__":
    main()
