"""proofs: every claim of the ZeRO lesson as a checked proposition (``ringemu prove``).

A claim (:class:`Claim`) has printed values with explicit rounding rules, an exact check (closed forms in
``fractions.Fraction``) and, wherever it applies, a run check (the project's own code); it passes only when
both agree exactly and both round to what the lesson prints.

May import ringemu and zero_stages (the run checks); nothing below imports it. Layers: rounding, exact, ids,
claim < runs and claims_* < catalog and report < commands.
"""
from .catalog import CATALOG, CLAIMS, EXTRAS, select
from .claim import Claim, NotAvailable, NotCheckableHere, Part, Result, evaluate
from .ids import CLAIM_IDS
from .report import prove, render_table, summary, to_json
from .runs import RunContext

__all__ = ["CATALOG", "CLAIMS", "EXTRAS", "CLAIM_IDS", "Claim", "Part", "Result", "NotAvailable",
           "NotCheckableHere", "RunContext", "evaluate", "prove", "render_table", "summary", "to_json", "select"]
