"""One builder by name: `open_memory` turns a method name, a store and the settings into a `Memory`.

Used by the evaluation, the service, the CLI and the README example alike. A method name is one of
the registered ones (``guimem.registry.MEMORY_METHODS``) or the import path of your own
(``my_pkg.memory:MyMemory``): any callable ``(kit, spec, env_factory) -> Memory``.
"""

from __future__ import annotations

from collections.abc import Callable

from guimem.embeddings import CachedEmbedder, create_embedder
from guimem.envs.base import Env
from guimem.errors import ConfigError
from guimem.llm import LLMClient, create_llm
from guimem.memory.base import Memory
from guimem.memory.indexcache import default_cache_dir
from guimem.memory.keys import MetaKey, meta_key
from guimem.memory.kit import MemoryKit
from guimem.memory.names import record_method
from guimem.memory.settings import MemorySpec
from guimem.registry import MEMORY_METHODS, Registry, default_registry
from guimem.settings import GuimemSettings
from guimem.storage import Store, create_store
from guimem.tokens import TiktokenCounter

METHODS = tuple(MEMORY_METHODS)
EnvFactory = Callable[[], Env]


def check_method(name: str, registry: Registry | None = None) -> str:
    """``name`` if it names a memory method (registered, or an import path that imports), else the error.

    Raises:
        UnknownBackendError: Not a method (with "did you mean").
        ImportPathError: An import path whose module or class cannot be imported.
    """
    (registry or default_registry()).check("memory", name)
    return name


def build_none(kit: MemoryKit, spec: MemorySpec, env_factory: EnvFactory | None) -> Memory:
    """The ``none`` control."""
    from guimem.memory.base import NoMemory, RoundLog

    return NoMemory(RoundLog(kit.store, kit.namespace))


def build_graph(kit: MemoryKit, spec: MemorySpec, env_factory: EnvFactory | None) -> Memory:
    """The Subgoal Memory Graph."""
    from guimem.memory.graph import GraphMemory

    return GraphMemory(kit, spec.graph.model_copy(update={"extractor": spec.extractor,
                                                          "exclude_source_task": spec.exclude_source_task}))


def build_skills(kit: MemoryKit, spec: MemorySpec, env_factory: EnvFactory | None) -> Memory:
    """SGDR skills (verified by replay when an env factory is given)."""
    from guimem.memory.skills.library import SkillMemory

    return SkillMemory(kit, spec.skills.model_copy(update={"exclude_source_task": spec.exclude_source_task}),
                       env_factory)


def build_steer(kit: MemoryKit, spec: MemorySpec, env_factory: EnvFactory | None) -> Memory:
    """STEER knowledge."""
    from guimem.memory.steer.memory import SteerMemory

    return SteerMemory(kit, spec.steer.model_copy(update={"extractor": spec.extractor,
                                                          "exclude_source_task": spec.exclude_source_task}))


def _append_all(variant: str, kit: MemoryKit, spec: MemorySpec) -> Memory:
    from guimem.memory.baselines import AppendAllMemory

    return AppendAllMemory(kit, variant, spec.append_all_k, spec.extractor,  # type: ignore[arg-type]
                           spec.exclude_source_task)


def build_append_all_similarity(kit: MemoryKit, spec: MemorySpec, env_factory: EnvFactory | None) -> Memory:
    """The AppendAll baseline, top-k by similarity."""
    return _append_all("similarity", kit, spec)


def build_append_all_operational(kit: MemoryKit, spec: MemorySpec, env_factory: EnvFactory | None) -> Memory:
    """The AppendAll baseline, contract-filtered."""
    return _append_all("operational", kit, spec)


def build_stack(kit: MemoryKit, spec: MemorySpec, env_factory: EnvFactory | None) -> Memory:
    """The stack."""
    from guimem.memory.stack import StackMemory

    return StackMemory(kit, spec, env_factory)


def create_memory(name: str, kit: MemoryKit, spec: MemorySpec | None = None,
                  env_factory: EnvFactory | None = None, registry: Registry | None = None) -> Memory:
    """The memory method ``name`` on an assembled kit (`open_memory` assembles the kit for you).

    Raises:
        UnknownBackendError: ``name`` is not a method (with "did you mean").
    """
    memory: Memory = (registry or default_registry()).create("memory", name, kit=kit, spec=spec or MemorySpec(),
                                                             env_factory=env_factory)
    return memory


def _check_embedder(store: Store, namespace: str, embedder: CachedEmbedder) -> None:
    key = meta_key(namespace, MetaKey.EMBEDDER)
    have = store.meta_get(key)
    if have is None:
        store.meta_set(key, embedder.name)
    elif have != embedder.name:
        raise ConfigError(f"this memory was built with embedder {have!r}, not {embedder.name!r}",
                          suggestion="use the same GUIMEM_EMBEDDER__NAME, or a new store")


def load_models(embedder: CachedEmbedder, settings: GuimemSettings) -> str:
    """Load memory's embedding model and token encoding now, so that the first recall does not wait for them (e5:
    about 0.1 s; the encoding 0.12 s, loaded once in a process for every memory's counter); what was loaded.

    Raises:
        GuimemError: The embedder cannot work (a remote one that does not answer, a missing model), or the token
            encoding is not available."""
    embedder.embed(["warm up"])
    TiktokenCounter(settings.token_encoding).load()
    return f"embedder {embedder.name} and token encoding {settings.token_encoding} loaded"


def open_memory(method: str, store: Store | str, settings: GuimemSettings, *, spec: MemorySpec | None = None,
                namespace: str | None = None, embedder: CachedEmbedder | None = None, llm: LLMClient | None = None,
                env_factory: EnvFactory | None = None, registry: Registry | None = None,
                create: bool = True) -> Memory:
    """Open the memory ``method`` in ``store`` (a `Store` or a URL/path), building what it needs.

    Args:
        method: A registered method name or ``module:Callable``.
        store: Where the memory lives; the memory owns it (``close`` closes it).
        settings: Embedder, LLM, token encoding and vector index settings.
        spec: Method options (the extractor among them).
        namespace: The memory's namespace in the store (default: the method name).
        embedder: A shared embedder (built from ``settings`` when absent).
        llm: A shared model client (built from ``settings`` when the spec asks for the ``llm`` extractor).
        env_factory: For verifying skills by replay.
        registry: Backends by name.
        create: Whether a SQLite file that does not exist may be created.

    Raises:
        UnknownBackendError: Unknown method.
        ConfigError: The store was built with another embedder.
    """
    reg = registry or default_registry()
    spec = spec or MemorySpec()
    check_method(method, reg)
    opened = create_store(store, reg, create=create) if isinstance(store, str) else store
    emb = embedder or create_embedder(settings.embedder, reg)
    ns = namespace or method
    _check_embedder(opened, ns, emb)
    if llm is None and spec.extractor == "llm":
        llm = create_llm(settings.llm, reg)
    kit = MemoryKit(store=opened, embedder=emb, counter=TiktokenCounter(settings.token_encoding), namespace=ns,
                    llm=llm, vector_index=settings.vector_index, cache_dir=settings.cache_dir or default_cache_dir(),
                    warm_indexes=settings.warm_indexes,
                    defences=spec.defences)
    memory = create_memory(method, kit, spec, env_factory, reg)
    record_method(opened, ns, method, memory.name)  # found again by its namespace or its own name
    return memory
