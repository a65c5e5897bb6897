import torch.nn as nn


def build_model():
    return nn.Transformer(d_model=256, nhead=4, num_encoder_layers=2, num_decoder_layers=2)
