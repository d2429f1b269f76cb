"""Model backends behind one async `LM` protocol."""

from infra.lm.protocol import LM, Completion, Message, Usage

__all__ = ["LM", "Completion", "Message", "Usage"]
