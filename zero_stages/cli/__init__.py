"""The commands zero_stages adds to ``ringemu`` through the ``ringemu.commands`` entry-point group: ``zero``
(:mod:`~zero_stages.cli.commands`) and ``memory`` (:mod:`~zero_stages.cli.memory_command`), with the argument types
and flag groups they share with the lesson's commands in :mod:`~zero_stages.cli.arguments`.

The top of zero_stages: it may import any of its modules (the torch runs lazily, torch being optional); only the
argument module is read by the lesson.
"""
__all__: list[str] = []
