"""Runs of the real collective engines installed on this machine, compared bit for bit with ringemu's registry.

One module per engine (``gloo``, ``ompi``, ``mpich``, ``xla``), each with the same two functions:

* ``available() -> str | None``: None when the engine runs here, else why not (what to install);
* ``run(quick: bool) -> list[dict]``: the engine's matrix (``quick``: the slice CI runs), one dict per
  (algorithm, collective) with ``engine``, ``entry`` (the registry name that reproduces it), ``collective``,
  ``cases``, ``bits_equal`` (cases in which every output element of every rank equals the entry's, bit for bit),
  ``bytes_cases`` and ``bytes_equal`` (cases whose per-peer bytes the engine exposes and that equal the ledger's;
  0 and 0 where it exposes none), and ``first_mismatch`` (None, or where the first differing case departs).

``python benchmarks/engines_table.py`` runs every available engine's full matrix and writes docs/engines.md;
``tests/test_engines.py`` runs the quick slices. Where each engine installs and how its algorithms are forced:
``.ci/run`` and ENGINES.md beside the project.
"""
ENGINES: tuple[str, ...] = ("gloo", "ompi", "mpich", "xla")  # one module each
