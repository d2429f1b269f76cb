"""The in-process engine behind the `local` backend: a transformers model on a
continuous batcher with its own fused decode, KV slab, prefix sharing and kernels,
batch invariant on the CPU it runs on. Nothing above `infra` imports it: they talk
to `infra.lm.LM`."""
