"""The night's stages: from traces to judged items and label targets, the fast-slow
schedule of prompt and weight steps, registration, feedback to the trace source, and
how each stage is timed, counted, persisted and resumed as a Prefect task."""
