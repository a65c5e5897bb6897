"""DCGAN on 64x64 images."""
import torch
import torch.nn as nn
import torchvision.datasets as dset
import torchvision.transforms as transforms
import torchvision.utils as vutils
from torch.utils.data import DataLoader

nz, ngf, ndf = 100, 64, 64
device = torch.device("cuda:0")
torch.backends.cudnn.benchmark = True

dataset = dset.ImageFolder(root="data/celeba", transform=transforms.Compose([
    transforms.Resize(64), transforms.CenterCrop(64), transforms.ToTensor(),
    transforms.Normalize((0.5, 0.5, 0.5), (0.5, 0.5, 0.5))]))
dataloader = DataLoader(dataset, batch_size=128, shuffle=True, num_workers=2)  # want: LT003 LT004


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

    def forward(self, z):
        return self.main(z)


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.main = nn.Sequential(
            nn.Conv2d(3, ndf, 4, 2, 1, bias=False),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf, ndf * 2, 4, 2, 1),  # want: LT016
            nn.BatchNorm2d(ndf * 2),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf * 2, 1, 4, 1, 0, bias=False),
            nn.Sigmoid(),
        )

    def forward(self, x):
        return self.main(x).view(-1)


netG = Generator().to(device)
netD = Discriminator().to(device)
criterion = nn.BCELoss()
fixed_noise = torch.randn(64, nz, 1, 1, device=device)
optD = torch.optim.Adam(netD.parameters(), lr=2e-4, betas=(0.5, 0.999))
optG = torch.optim.Adam(netG.parameters(), lr=2e-4, betas=(0.5, 0.999))

G_losses, D_losses = [], []
for epoch in range(25):
    for i, (real, _) in enumerate(dataloader):  # want: LT006 LT011
        real = real.to(device)
        b = real.size(0)
        label = torch.full((b,), 1.0, device=device)
        netD.zero_grad()
        out = netD(real)
        errD_real = criterion(out, label)
        errD_real.backward()
        D_x = out.mean().item()  # want: LT001
        noise = torch.randn(b, nz, 1, 1, device=device)
        fake = netG(noise)
        label.fill_(0.0)
        out = netD(fake.detach())
        errD_fake = criterion(out, label)
        errD_fake.backward()
        optD.step()
        netG.zero_grad()
        label.fill_(1.0)
        out = netG_out = netD(fake)
        errG = criterion(out, label)
        errG.backward()
        optG.step()
        G_losses.append(errG.item())  # want: LT001
        D_losses.append((errD_real + errD_fake).item())  # want: LT001
        if i % 50 == 0:
            print(f"[{epoch}/25][{i}/{len(dataloader)}] D(x)={D_x:.3f} G={errG.item():.3f}")
        if i == len(dataloader) - 1:
            with torch.no_grad():
                sample = netG(fixed_noise).detach().cpu()
            vutils.save_image(sample, f"out/fake_{epoch}.png", normalize=True)
