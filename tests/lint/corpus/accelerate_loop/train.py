"""A Hugging Face Accelerate loop: the accelerator moves batches and handles mixed
precision; logging only every `log_every` steps and only on the main process."""
import torch
from accelerate import Accelerator
from torch.utils.data import DataLoader

from data import build_datasets
from model import build_model

accelerator = Accelerator(mixed_precision="bf16", gradient_accumulation_steps=4)
train_ds, val_ds = build_datasets()
train_dl = DataLoader(train_ds, batch_size=32, shuffle=True, num_workers=4,  # want: LT004
                      pin_memory=True)
val_dl = DataLoader(val_ds, batch_size=64, num_workers=4, pin_memory=True,
                    persistent_workers=True)
model = build_model()
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
model, optimizer, train_dl, val_dl = accelerator.prepare(model, optimizer, train_dl, val_dl)
log_every = 50

for epoch in range(10):
    model.train()
    for step, batch in enumerate(train_dl):
        with accelerator.accumulate(model):
            loss = model(**batch).loss
            accelerator.backward(loss)
            optimizer.step()
            optimizer.zero_grad()
        if accelerator.is_main_process and step % log_every == 0:
            accelerator.print(f"epoch {epoch} step {step} loss {loss.item():.4f}")
    model.eval()
    losses = []
    for batch in val_dl:
        with torch.no_grad():
            out = model(**batch)
        losses.append(accelerator.gather_for_metrics(out.loss.repeat(batch["input_ids"].shape[0])))
    val_loss = torch.cat(losses).mean()
    accelerator.print(f"epoch {epoch}: val loss {val_loss.item():.4f}")
