"""guimem: long-term memory for frozen GUI agents, and a lifelong evaluation that proves it helps.

Importing the package is cheap: heavy backends (the e5 embedder, Selenium, usearch, ...) load only
when a backend is created.
"""

from guimem.errors import GuimemError

__version__ = "0.1.0"
__all__ = ["GuimemError", "__version__"]
