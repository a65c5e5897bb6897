"""``pitstop bench``: the optimisation ladder, measured on this machine.

A built-in training workload (synthetic JPEG files decoded and augmented in
DataLoader workers, a small ResNet-style CNN) climbs from a naive loop to a tuned
one, one knob per rung; every rung is timed the same way and compared with the
*ideal*: the same model fed a batch that is already on the device.

Modules, in the order data flows through them:

* :mod:`.dataset`   the synthetic JPEG cache (or a user's ImageFolder) as a Dataset
* :mod:`.transforms` random resized crop, flip, normalise (Pillow + torch, no torchvision)
* :mod:`.model`     the ResNet-style network, sized by device
* :mod:`.measure`   warm-up, timed repeats, median; device sync before each clock read
* :mod:`.ladder`    the rungs, the knobs they add, and the keep-or-leave-out rule
* :mod:`.distributed` the DDP rung under ``torchrun``
* :mod:`.machine`   what machine the numbers come from
* :mod:`.report`    table, JSON document, recommendation; :mod:`.plot` the bar chart
* :mod:`.command`   the click command that ties them together
"""
