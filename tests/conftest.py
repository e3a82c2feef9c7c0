"""Shared pytest set-up."""

# TensorFlow (imported by the Keras reference tests at collection) and triton (imported
# by torchvision through torch._dynamo) segfault when triton is loaded second in one
# process; loading torchvision first avoids it. The product never imports TensorFlow.
import torchvision.datasets  # noqa: F401
