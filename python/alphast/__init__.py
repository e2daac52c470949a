"""alphast from Python: read a run directory into pandas, and place the cells
of an AnnData with a trained run (docs/python.md). Pure Python on anndata,
pandas and numpy; `place` runs the alphast-run program."""
from .place import place
from .run import read_run

__all__ = ["read_run", "place"]
