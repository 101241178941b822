"""Test doubles shipped with guimem, so users can test their own integrations without a model or a device.

- `ScriptedLLM`: an in-process `LLMClient` that replays replies.
- `ScriptedOpenAIServer`: a real HTTP server on loopback speaking the OpenAI chat/embeddings wire format.
- `HashingEmbedder`: a deterministic embedder with no model (re-exported).
- `FakeAdbDevice`: a fake Android device that replays uiautomator dumps and records shell commands.
- `FormEnv`: a scripted form app implementing `Env`; `check_env`: the env contract checker.
- `check_memory`: the memory contract checker; `form_episodes`: scripted episodes to learn from.
"""

from guimem.embeddings.hashing import HashingEmbedder
from guimem.testing.android import FakeAdbDevice
from guimem.testing.envs import FormEnv, check_env
from guimem.testing.llm import ScriptedLLM, ScriptedOpenAIServer
from guimem.testing.memory import ScriptedPolicy, check_memory, form_episodes

__all__ = ["FakeAdbDevice", "FormEnv", "HashingEmbedder", "ScriptedLLM", "ScriptedOpenAIServer", "ScriptedPolicy",
           "check_env", "check_memory", "form_episodes"]
