"""The edges of flywheel: model backends, trace sources, agents, the registry, settings."""
