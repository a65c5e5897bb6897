"""Imported first by :mod:`pitstop.train`: without a usable torch, one ImportError that
says which build this machine wants, instead of a bare "No module named 'torch'"
(pitstop itself never installs torch: docs/install.md)."""

from pitstop.deps import torch_problem

_problem = torch_problem("pitstop.train")
if _problem:
    raise ImportError(_problem)
