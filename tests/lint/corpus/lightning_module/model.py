"""A LightningModule: the framework runs the loop; training_step and validation_step are
per-batch code. self.log() of a tensor does not sync (Lightning reduces it on the
device at epoch end); `.item()` inside training_step does."""
import lightning as L
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader

from data import MNISTData


class LitClassifier(L.LightningModule):
    def __init__(self, lr=1e-3):
        super().__init__()
        self.save_hyperparameters()
        self.net = nn.Sequential(
            nn.Conv2d(1, 32, 3, padding=1),  # want: LT016
            nn.BatchNorm2d(32),
            nn.ReLU(),
            nn.Conv2d(32, 64, 3, padding=1, bias=False),
            nn.BatchNorm2d(64),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
            nn.Linear(64, 10),
        )

    def forward(self, x):
        return self.net(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        logits = self(x)
        loss = F.cross_entropy(logits, y)
        self.log("train_loss", loss, prog_bar=True)
        if loss.item() > 100:  # want: LT001
            print("diverging")
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        logits = self(x)
        loss = F.cross_entropy(logits, y)
        acc = (logits.argmax(dim=1) == y).float().mean()
        self.log_dict({"val_loss": loss, "val_acc": acc}, prog_bar=True)

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.hparams.lr)


def main():
    data = MNISTData("data/")
    model = LitClassifier()
    trainer = L.Trainer(max_epochs=5, accelerator="gpu", devices=1, precision="bf16-mixed")
    trainer.fit(model,
                DataLoader(data.train, batch_size=64, num_workers=4, shuffle=True,  # want: LT004
                           pin_memory=True),
                DataLoader(data.val, batch_size=256, num_workers=4, pin_memory=True))  # want: LT004


if __name__ == "__main__":
    main()
