"""``python -m guimem.cli``."""

from guimem.cli.app import main

main()
