"""The MLflow model of one agent version: its prompt templates and its LoRA adapter.

Logged as "models from code": MLflow copies this file into the model, so loading a
version needs MLflow only, not flywheel. Serving stays with the LM backends (vLLM loads
the adapter folder); this model lets one URI such as `models:/agent@production` resolve
to exactly the prompts and adapter of that version.
"""

from __future__ import annotations

import json
from pathlib import Path

from mlflow.models import set_model
from mlflow.pyfunc import PythonModel

PROMPTS = "prompts"  # artifact key: a JSON file, component name -> template
ADAPTER = "adapter"  # artifact key: the LoRA adapter folder; absent in prompt-only versions


class AgentBundle(PythonModel):
    def load_context(self, context) -> None:
        self.prompts: dict[str, str] = json.loads(Path(context.artifacts[PROMPTS]).read_text())
        adapter = context.artifacts.get(ADAPTER)
        self.adapter_dir: Path | None = Path(adapter) if adapter else None

    def predict(self, model_input: list[str], params: dict | None = None) -> list[str]:
        """The templates of the named components, in the order asked."""
        return [self.prompts[name] for name in model_input]


set_model(AgentBundle())
