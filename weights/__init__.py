"""The slow loop: judged rollouts become LoRA adapters (rejection-sampled SFT, DPO pairs)."""
