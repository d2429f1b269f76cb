"""Model backends behind one async `LM` protocol."""

from infra.lm.protocol import LM, AdapterLM, Completion, Message, Usage

__all__ = ["LM", "AdapterLM", "Completion", "Message", "Usage"]
