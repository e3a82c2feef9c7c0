"""Training: one pack spec in, one record folder per run out.

`command` (initmem train) -> `trainer` (the epoch loop, metrics, early stopping,
checkpoints) -> `step` (one update, eager or as a CUDA graph) over `models` (packed Keras
ResNets), `optimizers` (Keras-faithful update rules, one module per optimizer) and `data`
(CIFAR-10 on the device, per-run order and augmentation). The only layer that needs torch.
"""
