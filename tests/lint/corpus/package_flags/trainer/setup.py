"""Speed flags set once for the whole package: they count for train.py."""
import torch


def configure():
    torch.backends.cudnn.benchmark = True
    torch.backends.cuda.matmul.allow_tf32 = True
