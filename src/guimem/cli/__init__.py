"""The ``guimem`` command line: a thin layer that parses arguments, calls the library, and prints."""
