"""``python -m placer.cli ARGS``: the ``placer`` command from a checkout, without installing."""

from placer.cli import main

main()
