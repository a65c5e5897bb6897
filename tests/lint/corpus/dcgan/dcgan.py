"""DCGAN in the style of pytorch/examples: two optimizers, D and G steps per batch,
losses printed with .item() on every batch, and fixed noise for samples every 100 steps."""
import argparse

import torch
import torch.nn as nn
import torch.optim as optim
import torchvision.datasets as dset
import torchvision.transforms as transforms
import torchvision.utils as vutils

parser = argparse.ArgumentParser()
parser.add_argument("--dataroot", required=True)
parser.add_argument("--workers", type=int, default=2)
parser.add_argument("--batchSize", type=int, default=64)
parser.add_argument("--niter", type=int, default=25)
opt = parser.parse_args()

device = torch.device("cuda:0")
nz, ngf, ndf = 100, 64, 64
dataset = dset.CIFAR10(root=opt.dataroot, download=True, transform=transforms.Compose([
    transforms.Resize(64), transforms.ToTensor(), transforms.Normalize((0.5,) * 3, (0.5,) * 3)]))
dataloader = torch.utils.data.DataLoader(dataset, batch_size=opt.batchSize,  # want: LT003 LT004
                                         shuffle=True, num_workers=int(opt.workers))


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.main = nn.Sequential(
            nn.ConvTranspose2d(nz, ngf * 8, 4, 1, 0, bias=False),
            nn.BatchNorm2d(ngf * 8),
            nn.ReLU(True),
            nn.ConvTranspose2d(ngf * 8, ngf * 4, 4, 2, 1, bias=False),
            nn.BatchNorm2d(ngf * 4),
            nn.ReLU(True),
            nn.ConvTranspose2d(ngf * 4, 3, 4, 2, 1, bias=False),
            nn.Tanh(),
        )

    def forward(self, input):
        return self.main(input)


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.main = nn.Sequential(
            nn.Conv2d(3, ndf, 4, 2, 1, bias=False),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf, ndf * 2, 4, 2, 1, bias=False),
            nn.BatchNorm2d(ndf * 2),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf * 2, 1, 4, 1, 0, bias=False),
            nn.Sigmoid(),
        )

    def forward(self, input):
        return self.main(input).view(-1, 1).squeeze(1)


netG = Generator().to(device)
netD = Discriminator().to(device)
criterion = nn.BCELoss()
fixed_noise = torch.randn(opt.batchSize, nz, 1, 1, device=device)
real_label, fake_label = 1.0, 0.0
optimizerD = optim.Adam(netD.parameters(), lr=0.0002, betas=(0.5, 0.999))
optimizerG = optim.Adam(netG.parameters(), lr=0.0002, betas=(0.5, 0.999))

for epoch in range(opt.niter):
    for i, data in enumerate(dataloader, 0):  # want: LT005 LT006 LT011
        netD.zero_grad()
        real_cpu = data[0].to(device)
        batch_size = real_cpu.size(0)
        label = torch.full((batch_size,), real_label, dtype=real_cpu.dtype, device=device)
        output = netD(real_cpu)
        errD_real = criterion(output, label)
        errD_real.backward()
        D_x = output.mean().item()  # want: LT001
        noise = torch.randn(batch_size, nz, 1, 1, device=device)
        fake = netG(noise)
        label.fill_(fake_label)
        output = netD(fake.detach())
        errD_fake = criterion(output, label)
        errD_fake.backward()
        D_G_z1 = output.mean().item()  # want: LT001
        errD = errD_real + errD_fake
        optimizerD.step()
        netG.zero_grad()
        label.fill_(real_label)
        output = netD(fake)
        errG = criterion(output, label)
        errG.backward()
        D_G_z2 = output.mean().item()  # want: LT001
        optimizerG.step()
        print(f"[{epoch}/{opt.niter}][{i}/{len(dataloader)}] Loss_D: {errD.item():.4f} "  # want: LT001
              f"Loss_G: {errG.item():.4f} D(x): {D_x:.4f} D(G(z)): {D_G_z1:.4f}/{D_G_z2:.4f}")  # want: LT001
        if i % 100 == 0:
            vutils.save_image(real_cpu, "real_samples.png", normalize=True)
            fake = netG(fixed_noise)
            vutils.save_image(fake.detach(), f"fake_samples_epoch_{epoch:03d}.png",
                              normalize=True)
    torch.save(netG.state_dict(), f"netG_epoch_{epoch}.pth")
