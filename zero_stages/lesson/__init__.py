"""The lesson as something to look at: the offline page (:mod:`~zero_stages.lesson.page`, ``ringemu lesson``), its
memory panel over the N grid (:mod:`~zero_stages.lesson.memory_grid`) and the matplotlib plots
(:mod:`~zero_stages.lesson.plots`, ``ringemu plot``). Every number they show comes from a run made while writing.

May import everything of zero_stages below the commands (API, memory reports, shared argument types in
:mod:`zero_stages.cli.arguments`) and ringemu's views; nothing imports it but the entry-point group.
"""
__all__: list[str] = []
